#!/usr/bin/env bash
# Runs every test and prints one closing line: "N passed, N failed, N skipped".
# Each test program or script prints PASS/FAIL/SKIP lines (tests/unit/test.h,
# tests/e2e/lib.sh); a program that dies without saying FAIL counts as one failure.
#   tests/run.sh [all|unit|e2e] [FILTER]
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
mode=${1:-all}
filter=${2:-}
export BUILD
log=$BUILD/test-logs
mkdir -p "$log"
pass=0 fail=0 skip=0
failed_names=()
failed_checks=()

run_one() { # name, command...
	local name=$1
	shift
	local out="$log/$(echo "$name" | tr '/ ' '__').log"
	local start=$SECONDS
	"$@" >"$out" 2>&1
	local rc=$?
	local p f s
	p=$(grep -c '^PASS ' "$out")
	f=$(grep -c '^FAIL ' "$out")
	s=$(grep -c '^SKIP ' "$out")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "FAIL $name: exited with status $rc (log: $out)" >>"$out"
		f=1
	fi
	pass=$((pass + p))
	fail=$((fail + f))
	skip=$((skip + s))
	grep -E '^(FAIL|SKIP) ' "$out" | sed 's/^/  /'
	printf '%-40s %3d passed %3d failed %3d skipped  (%ds)\n' "$name" "$p" "$f" "$s" $((SECONDS - start))
	if [ "$f" -gt 0 ]; then
		failed_names+=("$name")
		# the first failed checks again at the end, where a CI log cut in the middle still
		# shows them
		failed_checks+=("$(grep -E '^FAIL ' "$out" | head -n 3 | cut -c1-300)")
		echo "  ---- last lines of $out ----"
		tail -n 15 "$out" | sed 's/^/  | /'
	fi
}

if [ "$mode" = all ] || [ "$mode" = unit ]; then
	for t in "$BUILD"/tests/test_*; do
		[ -x "$t" ] || continue
		case "$t" in *"$filter"*) ;; *) continue ;; esac
		run_one "unit/$(basename "$t")" "$t"
	done
	for t in "$BUILD"/tests/san/test_*; do
		[ -x "$t" ] || continue
		case "$t" in *"$filter"*) ;; *) continue ;; esac
		ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
			run_one "asan+ubsan/$(basename "$t")" "$t"
	done
	if [[ "layers" == *"$filter"* || -z "$filter" ]]; then
		run_one "layers" python3 tests/layers.py
	fi
	if [ -x tests/fuzz/run.sh ] && [[ "fuzz" == *"$filter"* || -z "$filter" ]]; then
		run_one "fuzz" tests/fuzz/run.sh
	fi
fi

if [ "$mode" = all ] || [ "$mode" = e2e ]; then
	for t in tests/e2e/[0-9]*.sh; do
		[ -f "$t" ] || continue
		case "$t" in *"$filter"*) ;; *) continue ;; esac
		run_one "e2e/$(basename "$t" .sh)" bash "$t"
	done
fi

echo
if [ ${#failed_names[@]} -gt 0 ]; then
	printf '%s\n' "${failed_checks[@]}" | sed 's/^/  /'
	echo "failed: ${failed_names[*]} (logs in $log/)"
fi
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
