#!/usr/bin/env bash
# What a probe hit costs the job, by the job's own pace (tests/workloads/probe/ret_delay.c):
# a uprobe session on launch_loop's cudaLaunchKernel asks for a return hit on one call in 8
# and stalls another 500 ns in the kernel; the gaps after each against the rest. On a
# self-paced loop a stall pushes the next call out by all of itself (the response, 1), and
# a return hit by what it costs, more than its program; with --walk, a skipped stack walk
# shortens the next gap by about the walk's run time or more. Then gpubpf's own stalls on the
# same loop: what its comment says one pushed the next call out, against the stall as it
# timed it, 1 on a self-paced loop (its clock alone, without bpf_loop's start and end, read
# 1.06-1.16 there: bpf/cuda_charge.bpf.h). Last, what a call's work costs the job beyond
# its run time, by gpubpf's bare calls (GPUBPF_BARE_EVERY), on the loop and a Python step.
source "$(dirname "$0")/lib.sh"
need_root
if [ "${HAVE_CUDA:-}" != 1 ] || [ ! -x "$WL/cuda/launch_loop" ] || [ ! -x "$WL/probe/ret_delay" ]; then
	skip all "CUDA is not installed here (no nvcc/libcudart), or ret_delay is not built"
	exit 0
fi
lib=$(ldd "$WL/cuda/launch_loop" | awk '/libcudart/ { print $3 }')
lib=$(readlink -f "$lib")

# 1. ret_delay on the loop
"$WL/cuda/launch_loop" 100000000 --spin-us 4 >/dev/null &
pid=$!
sleep 0.5
"$WL/probe/ret_delay" --seconds 3 "$pid" "$lib" cudaLaunchKernel >"$TMP/rd.out" 2>"$TMP/rd.err"
rc=$?
kill "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
if [ $rc = 3 ]; then
	skip "ret-delay" "$(cat "$TMP/rd.err")"
else
	echo "# $(cat "$TMP/rd.out")"
	field() { sed -n "s/.* $1=\([-0-9.]*\).*/\1/p" "$TMP/rd.out"; }
	if [ $rc != 0 ] || [ -z "$(field response)" ]; then
		fail "ret-delay-runs" "exit $rc: $(tail -3 "$TMP/rd.err")"
	else
		pass "ret-delay-runs"
		check "ret-delay-gaps" awk -v n="$(field after_ret)" -v s="$(field after_stall)" \
			'BEGIN { exit !(n >= 1000 && s >= 1000) }'
		check "stall-pushes-all-of-itself" awk -v r="$(field response)" 'BEGIN { exit !(r >= 0.85 && r <= 1.15) }'
		check "stall-longer-than-its-clock" awk -v s="$(field stall_ns)" -v c="$(field stall_clock_ns)" \
			'BEGIN { exit !(s > c && c > 400) }'
		check "return-hit-costs-more-than-its-program" awk -v h="$(field ret_hit_ns)" -v p="$(field ret_prog_ns)" \
			'BEGIN { exit !(h > p && p > 0 && h < 5000) }'
	fi
fi

# ... and with --walk: every call walks the user stack but one in 8 at random, and the gaps
# after that one are shorter by the walk's whole cost, at least about its run time
if [ $rc = 0 ]; then
	"$WL/cuda/launch_loop" 100000000 --spin-us 4 >/dev/null &
	pid=$!
	sleep 0.5
	"$WL/probe/ret_delay" --walk --seconds 3 "$pid" "$lib" cudaLaunchKernel >"$TMP/rd.out" 2>"$TMP/rd.err"
	wrc=$?
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	echo "# --walk: $(grep after_skip "$TMP/rd.out")"
	if [ $wrc != 0 ] || [ -z "$(field walk_whole_ns)" ]; then
		fail "ret-delay-walk-runs" "exit $wrc: $(tail -3 "$TMP/rd.err")"
	else
		check "walk-costs-about-its-run-time-or-more" awk -v n="$(field after_skip)" -v p="$(field walk_prog_ns)" \
			-v w="$(field walk_whole_ns)" 'BEGIN { exit !(n >= 1000 && p > 0 && w > 0.8 * p && w < 5 * p + 500) }'
	fi
fi

# 2. gpubpf's stalls on the same loop, 5% budget: windows over a good part of its 5 s
# (its spin and count scaled where traps are dearer than the host the tests were sized on,
# lib.sh's hit_scale: there a 4 us spin leaves the probes most of the thread's time)
S=$(hit_scale)
SPIN=$(scaled 4 "$S")
LL_N=$(shrunk 800000 "$S")
echo "# this host: a traced call $(host_hit_us) us; launch_loop $LL_N --spin-us $SPIN"
GPUBPF_WINDOW_PERIOD=0.2 "$GPUBPF" record --overhead-budget 5 -o "$TMP/s.pb.gz" -- \
	"$WL/cuda/launch_loop" "$LL_N" --spin-us "$SPIN" >"$TMP/s.out" 2>"$TMP/s.err" || {
	fail "record" "$(tail -3 "$TMP/s.err")"
	exit 0
}
"$GPUBPF" report "$TMP/s.pb.gz" >"$TMP/s.rep" 2>&1
line=$(grep -o "a [0-9.e+-]* us stall at random on one call in [0-9]* made the thread's next call [0-9.e+-]* us later" \
	"$TMP/s.rep" | head -1)
echo "# launches: $line"
if [ -z "$line" ]; then
	fail "gpubpf-stall-response" "no stall in the comments: $(grep -m2 'estimate: launches' "$TMP/s.rep")"
else
	read -r x y < <(echo "$line" | awk '{ print $2, $(NF - 2) }')
	check "gpubpf-stall-response" awk -v x="$x" -v y="$y" 'BEGIN { exit !(x > 0 && y / x >= 0.85 && y / x <= 1.08) }'
fi

# 3. what a call's work (its stack walks, map updates) costs the job beyond its run time:
# one counted call in 8 in a window skips it (GPUBPF_BARE_EVERY=8), and the gaps after
# those are shorter by its run time and that cost. The loop's C code pays about nothing
# more (0.00-0.02 us here), a Python-driven step little (0.04-0.06 us, against the 0.5-0.8
# us of user time a hit costs it: the trap's, then). Those calls' stacks are not taken:
# the window's other calls count for them, and the kernels' sum is the estimate.
work_re='launches: [0-9.]* us a call ([0-9.]*-[0-9.]* at all of a delay pushing calls out; a gap after a bare call [0-9.-]* us shorter, its program [0-9.-]* us shorter)'
bare() { # NAME CMD...: record CMD with bare calls, its report into $TMP/NAME.rep
	local name=$1
	shift
	GPUBPF_BARE_EVERY=8 GPUBPF_WINDOW_PERIOD=0.2 "$GPUBPF" record --overhead-budget 5 --no-device-time \
		-o "$TMP/$name.pb.gz" -- "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" &&
		"$GPUBPF" report "$TMP/$name.pb.gz" >"$TMP/$name.rep" 2>&1
}
if ! bare bare-c "$WL/cuda/launch_loop" "$LL_N" --spin-us "$SPIN"; then
	fail "bare-record" "$(tail -3 "$TMP/bare-c.err")"
else
	work=$(grep -o "$work_re" "$TMP/bare-c.rep" | head -1)
	echo "# launch_loop --spin-us $SPIN, a call's work beyond its run time: $work"
	read -r cost prog < <(echo "$work" | awk '{ print $2, $(NF - 1) }')
	check "bare-work-measured" test -n "$work"
	check "bare-work-c-loop-small" awk -v c="$cost" -v p="$prog" 'BEGIN { exit !(c != "" && c < 0.2 && p > 0.1) }'
	est=$(sed -n 's/.*cuda estimate: launches: \([0-9,]*\) calls, 95% CI \([0-9,]*\)-\([0-9,]*\) .*/\1 \2 \3/p' \
		"$TMP/bare-c.rep" | tr -d ,)
	sum=$(awk '/^GPU kernel summary/ { getline; getline; getline; print $1; exit }' "$TMP/bare-c.rep")
	truth=$(sed -n 's/.*launches=\([0-9]*\).*/\1/p' "$TMP/bare-c.out")
	echo "# launches: estimate, interval ${est:-none}; the kernels' sum $sum; the loop's own $truth"
	read -r e lo hi <<<"$est"
	check "bare-estimate-covers-truth" awk -v e="$e" -v lo="$lo" -v hi="$hi" -v s="$sum" -v t="$truth" \
		'BEGIN { exit !(e > 0 && lo <= t && t <= hi && s > 0.999 * e && s < 1.001 * e) }'
fi
step=tests/workloads/python/launch_step.py
if bare bare-py python3 "$step" "$lib" 3; then
	work=$(grep -o "$work_re" "$TMP/bare-py.rep" | head -1)
	echo "# the Python-driven step, a call's work beyond its run time: $work"
	check "bare-work-python-measured" test -n "$work"
else
	fail "bare-record-python" "$(tail -3 "$TMP/bare-py.err")"
fi

# 4. A host whose traps are dearer, had on this one (GPUBPF_TEST_TRAP_NS, tests only;
# docs/DESIGN.md): every hit held 3 us more at entry and 1 us at return before its
# program's clock starts reads as that much more trap in gpubpf's own calibration, and
# none of it as program time.
if [ -n "${GPUBPF_TEST_TRAP_NS:-}${GPUBPF_TEST_TRAP_RET_NS:-}" ]; then
	skip "dear-traps-emulated" "this run already emulates dear traps"
else
	plain=$(calibration 0 0)
	dear=$(calibration 3000 1000)
	echo "# calibration (traced call, entry trap, program, return; us): plain $plain, traps held 3 and 1 us more $dear"
	check "dear-traps-emulated" awk -v a="$plain" -v b="$dear" 'BEGIN {
		split(a, p, " "); split(b, d, " ")
		exit !(p[2] != "" && d[2] != "" && d[2] - p[2] > 2.4 && d[2] - p[2] < 4.5 &&
		       d[4] - p[4] > 0.5 && d[4] - p[4] < 2 && d[3] < p[3] + 0.5) }'
fi
