#!/usr/bin/env bash
# A launch window against the job's own clock: launch_loop (a 4 us spin after each launch,
# a closed loop the probes slow inside a window) writes the time of every launch, and each
# window's count, and the slowdown the estimate corrects for, are checked against it
# (tests/e2e/window_truth.py says what): the windows' gate is exact, and the correction's
# stated range holds the slowdown the job had. Windows of a 0.2 s period at a 5% budget,
# so 6 s hold ~30 launch windows.
source "$(dirname "$0")/lib.sh"
need_root
if [ "${HAVE_CUDA:-}" != 1 ] || [ ! -x "$WL/cuda/launch_loop" ]; then
	skip all "CUDA is not installed here (no nvcc/libcudart): the windows are of CUDA probes"
	exit 0
fi
for run in 1 2; do
	GPUBPF_WINDOW_PERIOD=0.2 "$GPUBPF" record -v --overhead-budget 5 -o "$TMP/w.pb.gz" -- \
		"$WL/cuda/launch_loop" 1400000 --spin-us 4 --trace "$TMP/trace.bin" >"$TMP/w.out" 2>"$TMP/w.err" || {
		fail "record" "$(tail -3 "$TMP/w.err")"
		exit 0
	}
	python3 tests/e2e/window_truth.py "$TMP/trace.bin" "$TMP/w.err" >"$TMP/verdicts" 2>"$TMP/check.err"
	rc=$?
	if [ $rc != 0 ] && ! grep -q '^FAIL' "$TMP/verdicts"; then
		fail "check" "window_truth.py exited $rc: $(tail -2 "$TMP/check.err")"
		exit 0
	fi
	# a loaded machine (another thread preempting the loop in a window) is run again once
	if [ $run = 1 ] && grep -q '^FAIL correction-range' "$TMP/verdicts"; then
		sed 's/^/# first run: /' "$TMP/verdicts"
		continue
	fi
	break
done
sed "s/^\(PASS\|FAIL\) /\1 $T:/" "$TMP/verdicts"
