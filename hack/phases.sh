#!/usr/bin/env bash
# hack/phases.sh — run make targets side by side, in streams, with readable output.
#
#   hack/phases.sh 'test-e2e' 'test-integration test-conformance' -- 'test-daytwo'
#
# Each argument is a stream: make targets run one after the other in it; a stream stops at its
# first failing target (the rest are reported as not run), the other streams go on. The streams
# of a stage run at the same time; "--" ends a stage: the next starts when every stream of this
# one is done, and only when all of its targets passed (else its targets are reported as not
# run). Every line a target prints is shown as it comes, prefixed with the target's name
# ("[test-e2e] ..."), and kept in $PHASES_LOG_DIR/<target>.log (default _out/phases). At the
# end: a table of every target (result, seconds, and how busy the machine's CPUs were while it
# ran: the mean of /proc/stat samples every 5 s, kept in $PHASES_LOG_DIR/cpu.txt), the last
# $PHASES_TAIL lines (default 60) of each failed target's log, then the lines of that log that
# say what failed (go test's FAIL lines, panics, failed assertions' file:line), and exit status
# 1 when any target failed or was not run.
#
# The targets themselves take their labs down whatever happened (make test-e2e, test-daytwo,
# test-conformance do), so a failure in one stream leaves no lab up in any.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LOGS=${PHASES_LOG_DIR:-$ROOT/_out/phases}
TAIL=${PHASES_TAIL:-60}
MAKE=${MAKE:-make}
[ $# -gt 0 ] || { echo "usage: hack/phases.sh 'target [target...]' ['target...' ...]" >&2; exit 2; }
mkdir -p "$LOGS"
results=$(mktemp -d)
start=$(date +%s)

# cpu.txt: "<unix time> <busy %>" every 5 s, busy over all cores (100: every core busy).
sample() {
	local u n s i w q sq st b t pb pt
	read -r _ u n s i w q sq st _ </proc/stat
	pb=$((u + n + s + q + sq + st)) pt=$((u + n + s + i + w + q + sq + st))
	while sleep 5; do
		read -r _ u n s i w q sq st _ </proc/stat
		b=$((u + n + s + q + sq + st)) t=$((u + n + s + i + w + q + sq + st))
		[ $t = $pt ] || echo "$(date +%s) $((100 * (b - pb) / (t - pt)))"
		pb=$b pt=$t
	done
}
: >"$LOGS/cpu.txt"
sample >>"$LOGS/cpu.txt" &
sampler=$!
trap 'kill $sampler 2>/dev/null; rm -rf "$results"' EXIT

stream() {
	local t rc=0 t0
	for t in "$@"; do
		if [ $rc != 0 ]; then
			echo "$t skipped 0 0 0" >>"$results/$t"
			continue
		fi
		t0=$(date +%s)
		echo ">> [$(($(date +%s) - start))s] $t: started (log: ${LOGS#"$ROOT"/}/$t.log)"
		# make's status survives the pipe (pipefail); sed -u writes whole lines as they come.
		"$MAKE" --no-print-directory -C "$ROOT" "$t" 2>&1 | tee "$LOGS/$t.log" | sed -u "s/^/[$t] /" || rc=$?
		echo "$t $([ $rc = 0 ] && echo ok || echo "FAILED(rc=$rc)") $(($(date +%s) - t0)) $t0 $(date +%s)" >>"$results/$t"
		echo ">> [$(($(date +%s) - start))s] $t: $([ $rc = 0 ] && echo ok || echo "FAILED (rc=$rc)") in $(($(date +%s) - t0))s"
	done
}

# stage STREAM...: runs the streams side by side; fails when a target of them did not pass.
stage() {
	local s t res pids=()
	for s in "$@"; do
		# shellcheck disable=SC2086 # a stream is a list of target names
		stream $s &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || true; done
	for s in "$@"; do
		for t in $s; do
			read -r _ res _ <"$results/$t"
			[ "$res" = ok ] || return 1
		done
	done
}

streams=() ok=1
for a in "$@" --; do
	if [ "$a" != -- ]; then
		streams+=("$a")
		continue
	fi
	[ ${#streams[@]} = 0 ] || if [ $ok = 1 ]; then
		stage "${streams[@]}" || ok=0
	else
		for s in "${streams[@]}"; do for t in $s; do echo "$t skipped 0 0 0" >>"$results/$t"; done; done
	fi
	streams=()
done

failed=0
echo ">> phases done in $(($(date +%s) - start))s (cpu: the machine's mean CPU use while the step ran):"
for s in "$@"; do
	[ "$s" != -- ] || continue
	for t in $s; do
		read -r name res secs t0 t1 <"$results/$t"
		cpu=$(awk -v a="$t0" -v b="$t1" '$1 > a && $1 <= b { s += $2; n++ } END { if (n) printf "%d%%", s / n; else printf "-" }' "$LOGS/cpu.txt")
		printf '   %-20s %-14s %5ss  cpu %s\n' "$name" "$res" "$secs" "$cpu"
		[ "$res" = ok ] || failed=1
	done
done
for s in "$@"; do
	[ "$s" != -- ] || continue
	for t in $s; do
		read -r _ res _ _ _ <"$results/$t"
		case $res in
		FAILED*)
			echo ">> $t FAILED: the last $TAIL lines of ${LOGS#"$ROOT"/}/$t.log"
			tail -n "$TAIL" "$LOGS/$t.log"
			# A failed test's own log can be longer than the tail: name what failed and
			# where, whatever the tail shows (go test's FAIL lines, panics, and the
			# file:line of each failed assertion).
			echo ">> $t FAILED: what failed in ${LOGS#"$ROOT"/}/$t.log (at most $TAIL lines)"
			grep -a -E '^[[:space:]]*--- FAIL|^FAIL[[:space:]]|^panic: |^fatal error: |^[[:space:]]+[A-Za-z0-9_]+_test\.go:[0-9]+: |timed out' \
				"$LOGS/$t.log" | head -n "$TAIL" || true
			;;
		esac
	done
done
exit $failed
