#!/usr/bin/env bash
# Runs every fuzz target of every package (or of the packages given) for FUZZTIME each, one
# after the other. Packages are found by their test files declaring `func Fuzz…`.
# Usage: hack/fuzz.sh FUZZTIME [PACKAGE...]   (e.g. hack/fuzz.sh 30s, hack/fuzz.sh 1m ./speaker/...)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

FUZZTIME=${1:?usage: hack/fuzz.sh FUZZTIME [PACKAGE...] (for example 30s)}
shift
patterns=("$@")
[ ${#patterns[@]} -gt 0 ] || patterns=(./...)

ran=0
while read -r pkg dir; do
	grep -qs '^func Fuzz' "$dir"/*_test.go || continue
	targets=$(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true)
	for t in $targets; do
		echo ">> fuzzing $pkg $t for $FUZZTIME"
		go test -run '^$' -fuzz "^${t}\$" -fuzztime "$FUZZTIME" "$pkg"
		ran=$((ran + 1))
	done
done < <(go list -f '{{.ImportPath}} {{.Dir}}' "${patterns[@]}")
if [ "$ran" -eq 0 ]; then
	echo "no fuzz targets found in ${patterns[*]}" >&2
	exit 1
fi
echo ">> $ran fuzz targets ran for $FUZZTIME each"
