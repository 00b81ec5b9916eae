#!/usr/bin/env bash
# Runs every fuzz target of ./allocator for FUZZTIME each, one after the other.
# Usage: hack/fuzz.sh FUZZTIME   (e.g. hack/fuzz.sh 30s)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

FUZZTIME=${1:?usage: hack/fuzz.sh FUZZTIME (for example 30s)}
pkg=./allocator

targets=$(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true)
if [ -z "$targets" ]; then
	echo "no fuzz targets found in $pkg" >&2
	exit 1
fi
for t in $targets; do
	echo ">> fuzzing $t for $FUZZTIME"
	go test -run '^$' -fuzz "^${t}\$" -fuzztime "$FUZZTIME" "$pkg"
done
