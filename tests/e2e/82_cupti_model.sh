#!/usr/bin/env bash
# The injection library's CUPTI backend, the code only a GPU otherwise runs, against a CUPTI
# that keeps CUPTI's documented contract and behaves as the one measured on an H100
# (tests/workloads/inject/cupti_model.c): activity dearer until cuptiFinalize, set-up and
# teardown that take time, a device queue of 1024 launches, and a forced flush that hands
# back a kernel still queued with no times. gpubpf records with device time in windows:
# every window's records must come in (none lost), each of a launch followed in a window,
# and the stated interval must hold the producer's own count, launch-bound (1 us kernels,
# the device keeps up) and device-bound (20 us kernels: a launch waits for the queue, and
# a window's kernels are still queued when it closes). The launches are runtime calls with
# the driver's inside them (callbacks for both), and in one case driver calls alone
# (Triton's), and in one the driver call has a correlation id of its own, which the
# kernel's record carries, and in one activity's cost per launch rises as the job runs (the
# cost is measured again, and followed): the model aborts the job where the library breaks what a real
# CUPTI needs
# kept (cuptiFinalize in a nested call's exit, CUPTI called while a finalize unwinds),
# as a real one then breaks the job's heap (docs/DEVICE_TIME.md). Last, the real two-thread
# PyTorch loop's timeline (tests/workloads/cuda/replay --cupti-model: its 6 s start, its
# first launches of milliseconds, then 10,000 launches a second from two threads): the
# cost must be measured (on the H100 it was not, and the job got no device time), and
# the estimate hold the replay's own count. The summary line gives the estimate, and says
# where the windows were too few for one (the H100's set-up, 1% budget, 3 s).
source "$(dirname "$0")/lib.sh"
need_root
need_go
PROD=$WL/inject/producer
MODEL=$WL/inject/libcupti_model.so
if [ "${HAVE_CUDA:-}" != 1 ] || [ ! -x "$PROD" ] || [ ! -e "$MODEL" ]; then
	skip all "no CUDA/CUPTI headers, or $PROD / $MODEL missing (make tools): the CUPTI backend NOT checked"
	exit 0
fi

# One run: kernels of KERNEL_NS for 4 s under a 5% budget in 0.1 s periods. The model's
# set-up and teardown are 0.2 ms and 0.1 ms here, so that windows are many (make bench
# runs the H100's).
run_model() { # name kernel_ns [driver|replay|nested|changes]
	local job=("$PROD" model 4 "$2" "$MODEL") nested=0 later="" again=300
	case "${3:-}" in
	driver) job+=(driver) ;;
	replay) job=("$WL/cuda/replay" "$WL/cuda/train.calls" --cupti-model "$MODEL" --kernel-ns "$2") ;;
	nested) nested=1 ;;
	changes) job=("$PROD" model 6 "$2" "$MODEL") later=1:4000 again=1 ;;
	esac
	CUPTI_MODEL_NESTED_IDS=$nested CUPTI_MODEL_SETUP_US=200 CUPTI_MODEL_FINALIZE_US=100 \
		CUPTI_MODEL_DIRTY_LATER=$later GPUBPF_DEVICE_REMEASURE=$again \
		GPUBPF_WINDOW_PERIOD=0.1 record_gpu "$1" --overhead-budget 5 -- "${job[@]}"
}

check_model() { # name
	python3 - "$TMP/$1.raw" "$TMP/$1.log" "$1" <<'PY' | sed "s/^\(PASS\|FAIL\) /\1 82_cupti_model:$1:/"
import math, re, sys
raw, log = open(sys.argv[1]).read(), open(sys.argv[2]).read()
num = lambda s: math.inf if s == "unbounded" else float(s.replace(",", ""))
def verdict(name, ok, why=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + why))
broken = re.search(r"cupti model: CUPTI's contract broken: (.*)", log)
verdict("cupti-contract-kept", not broken, broken[1] if broken else "")
truth = re.search(r"(?:producer|replay): (?:launches=\d+ .*)?windowed_launches=(\d+) .*every=(\d+)", log)
measured = re.search(r"gpu estimate: .* and (\d+) of the cost measurement's", raw)
cost = re.search(r"Comment: gpu cost: (.{0,120})", raw)
verdict("cost-measured", bool(cost) and "not measured" not in cost[1], cost[1] if cost else "no gpu cost comment")
# the one-off part: the model's set-up (0.2 ms, at the first activity enable after a
# subscribe: the measurement's "on" phase) and its finalize (0.1 ms, at the job's next
# API exit, timed there and told the watcher), at least
fixed = re.search(r"CUPTI's set-up at attach and the measurement's switches [0-9.e+-]+% \(([0-9.e+-]+) ms, once\)", raw)
verdict("one-off-cost-counted", bool(fixed) and 0.29 <= float(fixed[1]) <= 100,
        f"{fixed[1]} ms" if fixed else "no one-off part in the gpu cost comment")
# CUPTI's dispatch, timed in the job on the library's own cuCtxGetCurrent: the model spins
# 125 ns in each callback it makes (a pair 250 ns; 0.38-0.40 us with the model's and the
# library's own work around it, here), scaled by the pairs a launch call met: a runtime
# launch two (its driver call's and its own), a driver launch alone one
disp = re.search(r"timed in the job, ([0-9.]+) us a pair, ([0-9.e+]+) pairs a launch", raw)
pairs = 1 if sys.argv[3] == "driver_only" else 2
verdict("dispatch-timed-in-job", bool(disp) and 0.25 <= float(disp[1]) <= 2 and abs(float(disp[2]) - pairs) < 0.05,
        f"{disp[1]} us a pair, {disp[2]} pairs a launch (the model: 0.25 us, {pairs})" if disp
        else "the gpu cost comment does not say CUPTI's dispatch was timed in the job")
# what was spent once (the one-off part, the measurement, the callbacks on outside windows)
# is repaid from the budget: at 5%, the model's ~40 ms take 2 s of the 4 s run at most;
# with it, what periods spent over the budget (the probes' plan from a cost measured low)
rep = re.search(r"what was spent once, ([0-9.e+-]+) ms, is repaid from the budget.*over the budget "
                r"\(([0-9.e+-]+) ms\), at most half the budget, and ([0-9.e+-]+) ms of the two were repaid by the end",
                raw)
once, over, repaid = (float(rep[1]), float(rep[2]), float(rep[3])) if rep else (0, 0, 0)
# Half of it at least, or 70% of what half the 5% budget holds over the recording where
# that is less: cost_changes, measured again every second for 6 s, spends 270-330 ms once
# (its measurements' callbacks, CUPTI's dispatch to them timed at 0.9-1.1 us a launch),
# and half the budget holds about 190 ms of its 7.6 s, part of it before the windows'
# periods begin (158-164 ms repaid in 4 runs, 83-86% of it)
rec = re.search(r"gpubpf: wrote .*?, ([0-9.]+) s[,)]", log)
# half the last of the 3 digits the comment says (111 ms repaid of 104 ms and 6.39 ms over
# was 0.6% over the sum as said: within what the digits left out)
ulp = lambda v: 0.5 * 10 ** (math.floor(math.log10(v)) - 2) if v > 0 else 0
most = 0.7 * 0.5 * 0.05 * float(rec[1]) * 1e3 if rec else math.inf
verdict("one-off-cost-repaid-from-budget",
        bool(rep and fixed) and once >= float(fixed[1]) and min(0.5 * once, most) <= repaid + ulp(repaid)
        and repaid - ulp(repaid) <= once + ulp(once) + over + ulp(over),
        f"{repaid} ms of {once} ms and {over} ms over repaid (half the budget holds {most / 0.7:.0f} ms)" if rep
        else "no repayment in the gpu cost comment")
gpu = re.search(r"Comment: gpu: .* in windows: (\d+) kernels .* of (\d+) launches and copies followed in (\d+) "
                r"windows.* (\d+) lost,", raw)
# the top is "unbounded" where CUPTI's cost at its dearest took all of a launching thread's
# time in a window (a loaded machine, cost_changes's 7.25 us of 12.2: once in a clean-clone
# run): the interval is then no use, and run again once like any too wide
est = re.search(r"gpu estimate: kernels ([0-9,]+), 95% CI ([0-9,]+)-([0-9,]+|unbounded)[ ;]", raw)
# too few sampled periods for an interval (the budget spaced windows out: CI, once, for the
# replay): a "windowed" failure, run again once, with the comment's own reason
few = re.search(r"gpu estimate: [^\n]*?\(too few sampled periods[^)]*\)", raw)
if truth and gpu and not est and few:
    verdict("windowed", False, few[0][len("gpu estimate: "):])
    sys.exit()
if not (truth and gpu and est):
    cmt = re.search(r"gpu estimate: .{0,160}", raw)
    verdict("comments", False, f"truth {bool(truth)} gpu {bool(gpu)} estimate {cmt[0] if cmt else False}")
    sys.exit()
# the estimate counts the cost measurement's launches once, before the windows' periods
t, every = int(truth[1]) + (int(measured[1]) if measured else 0), int(truth[2])
recs, followed, windows, lost = (int(gpu[i]) for i in range(1, 5))
k, lo, hi = num(est[1]), num(est[2]), num(est[3])
# the producer's truth counts from where the first window's period begins (dev_win.period),
# whatever EVERY gpubpf chose: a drain's retries can make a window's switches dear enough
# for a period of 2 here, and 4 s then hold 20 periods of windows, not 40
verdict("windowed", windows >= 20 // max(every, 1), f"every {every}, {windows} windows")
# a forced flush at a window's end lost every kernel still queued (all of them, device-bound)
verdict("no-record-lost", lost == 0, f"{lost} records lost")
verdict("every-followed-launch-has-its-record", abs(recs - followed) <= max(5, followed // 100),
        f"{recs} records, {followed} launches followed")
verdict("truth-in-stated-interval", lo <= t <= hi, f"{t} launches, estimate {k:.0f} [{lo:.0f}, {hi:.0f}]")
# the summary on stderr gives the estimate, not the kernels seen in windows
summ = re.search(r"device time: ~([0-9,]+) kernels [0-9.e+]+ ms \(estimates, 95% CI \+-[0-9.e+]+%, from (\d+) "
                 r"kernels seen in (\d+) windows\)", log)
verdict("summary-says-the-estimate", bool(summ) and num(summ[1]) == k and int(summ[3]) == windows,
        f"summary {summ[0] if summ else 'without an estimate'}, estimate {k:.0f} in {windows} windows")
half = 100 * (hi - lo) / 2 / k if k else 1e9
# The interval has two parts (the estimate's comment says both): the windows' sampling,
# which narrows as the square root of the windows, and CUPTI's cost at either end of its
# range (0.9-1.3 c, est_run_delay) in the correction of what it pushed out of the windows,
# which does not: it is as wide as c is large beside a launch. A launch-bound thread's
# correction x = P / (P - c) over a launch's period P without CUPTI, at least the model's
# own launch, B = 4.5 us (MODEL_LAUNCH_NS; not the comment's "against B us without", which
# has gpubpf's launch probe in it where the measurement met it in: 9.19 us once, in a full
# run); at 1.3 c + 0.3 us, x is B / (B - 0.3 c - 0.3 us) times itself at most. Held to that
# with a fifth more for the windows' spread of P (a window's own x at its own P). Until the
# twelfth session c was 3-6 us and both parts were held to +-60% together (+-75% for
# cost_changes); where the launch probe's hit is dearer c is 6-9.7 us, the correction's
# range alone x1.5-x2.2 (+-37-76% with the sampling's +-7-16%: launch_bound, cost_changes,
# in 8 runs).
parts = re.search(r"gpu estimate: kernels [0-9,]+, 95% CI [0-9,]+-[0-9,]+ \(\+-[0-9.e+]+%: ([0-9,]+)-([0-9,]+) at either "
                  r"end of CUPTI's cost's range in the correction, and the windows' sampling \+-([0-9.e+]+)% around them\)", raw)
costs = re.search(r"a launch costs ([0-9.]+) us more with it", raw)
# An interval narrows as the square root of the windows it has: 20 or more are held to the
# limit; fewer, where a loaded machine made the set-up dear and the budget spaced the
# windows out (CI: 7 and 8 windows, every 8 and 4 periods, +-89% and +-62%, where 31 had
# +-39%), to the limit that many windows allow. The sampling alone is held where both
# parts together were: +-60% at 20 windows (the replay's bursts, 79 records in 12
# windows, read +-65% of the 77% that allows, where 40% failed it in a clean clone).
limit = 60 * math.sqrt(max(1, 20 / max(windows, 1)))
samp = float(parts[3]) if parts else math.inf
verdict("interval-useful", samp <= limit,
        f"the windows' sampling +-{samp:.0f}% from {windows} windows (limit +-{limit:.0f}%)" if parts
        else "unbounded at the top (CUPTI's cost at its dearest took a launching thread's whole window)"
        if math.isinf(hi) else "the gpu estimate comment does not split its interval")
if parts and costs:
    c_us, b_us = float(costs[1]), 4.5
    room = b_us - 0.3 * c_us - 0.3
    most = 1.2 * b_us / room if room > 0 else math.inf
    s_lo, s_hi = num(parts[1]), num(parts[2])
    verdict("correction-range-from-c", s_hi <= most * k and s_lo >= 0.5 * k,
            f"{s_lo:.0f}-{s_hi:.0f} about {k:.0f} (x{s_hi / k:.2f} at the top; c {c_us} us beside the model's "
            f"{b_us} us launch allows x{most:.2f})")
elif not math.isinf(hi):
    verdict("correction-range-from-c", False, "no cost or no split interval in the comments")
# device-bound, CUPTI's cost pushes no launch out: the windows' count alone is the
# estimate, within a few percent (+-3% in 6 runs). A window due while the last one's
# records drained followed nothing (the library's backend left between states): -5% to
# -11% then.
# The job's launches change: 1 s in, activity costs them 4 us, not 1.5 us (6 s of them),
# c 2.5 us more after than before on the model. Measured again every second, the cost
# follows: some measurement saw less than the new cost (the one at attach, before the
# change, or one across it: under load the first one ends late), and the one taken is the
# new one (of two measurements the later; of three the median, after gpubpf asked for the
# third sooner, the last two apart). Held against the model's step (2.5 us), not against
# what c was: the launch probe's own cost moves c (its stack walk took a page fault every
# hit until the twelfth session; its trap is a syscall on a 5-byte nop since the
# thirteenth: c 3.4-3.7 us before the change and 6.0-6.2 after, here).
if sys.argv[3] == "cost_changes":
    step = 2.5  # CUPTI_MODEL_DIRTY_LATER=1:4000 against the model's 1500 ns
    # A launch's "on" time, the model unchanged, is one of two about 1.5 us apart from one
    # measurement to the next (12.9-13.0 or 14.3-14.9 us after the change, in runs of this
    # binary and of bdfdc54's alike, on this host kind): a measurement before the change
    # at the dearer and all after it at the cheaper differ by 1.2 us, not 2.5 (once in 3
    # runs of e2e 82, both tries). Held to 0.4 of the step.
    moved = 0.4 * step
    again = re.search(r"measured in the job (\d+) times \(.*?c ([0-9.]+)-([0-9.]+) us over them all\)", raw)
    # c over the measurements is the whole cost a launch pays (activity, the launch probe, the
    # callbacks and CUPTI's dispatch to them): held against the whole cost taken, not against
    # activity and the probe alone (0.77 us less here, which made the check's margin 0.5 us)
    took = re.search(r"a launch costs ([0-9.]+) us more with it \(CUPTI's activity and the launch probe", raw)
    verdict("cost-measured-again", bool(again) and int(again[1]) >= 3 and float(again[3]) - float(again[2]) >= moved,
            f"{again[1]} times, c {again[2]}-{again[3]} us" if again else "not measured again")
    verdict("cost-follows-the-job", bool(took and again) and float(took[1]) >= float(again[2]) + moved,
            f"{took[1]} us taken, c {again[2]}-{again[3]} us" if again and took else "no cost")
# Who set the pace, for the correction of what CUPTI's cost pushed out of a window: the
# device's records tell it (their first kernel on the stream started as launched, or
# waited for the one before it), of nearly every thread's run in a window. The model's
# launch-bound kernels (1 us of an 11 us launch) all start as launched; its device-bound
# ones (20 us, a queue of 1024) all wait. The launch probes' stall experiment said
# 0.2-0.96 of the launch-bound ones over runs, and device time read 0.66-0.85 of the truth.
pace = re.search(r"gpu correction: .*? (\d+) started as launched and (\d+) waited \(the device's records, in "
                 r"(\d+) of (\d+) threads' runs", raw)
if sys.argv[3] in ("launch_bound", "device_bound"):
    free, queued, told, runs = (int(pace[i]) for i in range(1, 5)) if pace else (0, 0, 0, 0)
    mine = free if sys.argv[3] == "launch_bound" else queued
    verdict("device-records-tell-the-pace", bool(pace) and told >= 0.8 * runs and mine >= 0.95 * (free + queued) > 0,
            f"{free} started as launched, {queued} waited, told in {told} of {runs} runs" if pace else "not said")
# ... and the same records say it of the launch probes' windows and of the job's slowdown:
# device-bound, a delay came out of the thread's waits on the device (the bench's row
# said 1.4% estimated against 0.005% measured with the stalls' share)
if sys.argv[3] in ("launch_bound", "device_bound"):
    said = re.search(r"cuda estimate: launches: .*of the probes' delay ([0-9.]+) pushed calls out over the recording, as "
                     r"the device's records said", raw)
    slowed = re.search(r"cuda cost: the job slowed by an estimated ([0-9.e+-]+)% .*pushed its calls out \(the "
                       r"device's records\)", raw)
    ok = bool(said) and (float(said[1]) >= 0.95 and not slowed if sys.argv[3] == "launch_bound"
                         else float(said[1]) <= 0.05 and bool(slowed))
    verdict("device-records-tell-the-launches-pace", ok,
            f"launches' share {said[1] if said else 'not from the records'}, job slowed "
            f"{slowed[1] + '%' if slowed else 'by all the thread paid'}")
if sys.argv[3] == "device_bound":
    verdict("device-bound-within-8pct", abs(k / t - 1) <= 0.08 if t else False, f"{100 * (k / t - 1):+.1f}%")
print(f"# {t} launches, estimated {k:.0f} ({100 * (k / t - 1):+.1f}%), 95% CI +-{half:.0f}%; {recs} records of "
      f"{followed} followed launches in {windows} windows (every {every}), {lost} lost; {repaid:.3g} ms of "
      f"{once:.3g} ms spent once repaid")
PY
}

# A 95% interval misses the truth one run in twenty by design, and a machine busy beside
# the job leaves the budget room for a window every 4 periods or so (the interval then
# +-71-78% with a CPU hog beside it): a miss, or so wide an interval, is run again once;
# so is cost_changes where a loaded machine put its measurements all after the change, and
# a run with too few windows: a loaded machine can make the cost measurement at attach
# take 4,000-10,000 launches where it takes ~400 (seen at 4ba585e and after, alone and in
# a full run), and repaying that from the budget holds windows back (6 windows at every 2,
# 1 of 2 clean-clone runs). So is the device-bound estimate off by more than 8%: where its
# windows came one in 8 periods, not one in 1-2 (the set-up timed dear in a full run; its
# log did not say why), it was +8.6%, inside its +-13% (1 of 3 clean-clone runs at
# 1fe5422; -1.5% to +1.5% in 6 runs of e2e 82 alone).
again='in-stated-interval\|interval-useful\|correction-range-from-c\|cost-measured-again\|cost-follows-the-job\|windowed\|device-bound-within-8pct'
for c in launch_bound:1000 device_bound:20000 driver_only:1000:driver nested_ids:1000:nested \
	pytorch_replay:2000:replay cost_changes:1000:changes; do
	IFS=: read -r name ns mode <<<"$c"
	if ! run_model "$name" "$ns" "$mode"; then
		broken=$(sed -n "s/^cupti model: CUPTI's contract broken: //p" "$TMP/$name.log")
		[ -n "$broken" ] && fail "$name:cupti-contract-kept" "$broken"
		continue
	fi
	check_model "$name" >"$TMP/$name.verdicts"
	if grep -q "^FAIL .*\\($again\\)" "$TMP/$name.verdicts" && run_model "$name" "$ns" "$mode"; then
		sed -n "s/^FAIL \\(.*\\($again\\)\\): /# first run: \\1: /p" "$TMP/$name.verdicts"
		check_model "$name" >"$TMP/$name.verdicts"
	fi
	cat "$TMP/$name.verdicts"
done

# The H100's set-up and teardown (the model's defaults: 10 and 3 ms) under the default 1%
# budget and 1 s periods: a window comes once in 8-16 s, so a 3 s run holds one at most,
# and the summary says that its figure is no estimate to trust, and why.
if record_gpu few_windows -- "$PROD" model 3 1000 "$MODEL"; then
	few=$(grep -o "device time: ~[0-9,]* kernels [0-9.e+]* ms (from [0-9]* kernels seen in [01] windows\?: too few for an estimate to trust; this budget opens one every [0-9.]* s" "$TMP/few_windows.log")
	secs=${few##* every }
	if [ -n "$few" ] && python3 -c "import sys; sys.exit(0 if float('${secs% s}') >= 4 else 1)" &&
		grep -q "Comment: gpu estimate: .*(too few sampled periods for an interval: no estimate to trust; this budget opens a window once in ${secs% s} s)" "$TMP/few_windows.raw"; then
		pass "few_windows:summary-says-too-few"
	else
		fail "few_windows:summary-says-too-few" "$(grep wrote "$TMP/few_windows.log")"
	fi
fi

# A job whose records come at its exit, after it loaded an object (CUPTI's teardown at exit
# on an H100): gpubpf drains them once the process is gone. Its device time must still be
# under the launch's call site, without the library's, the model's (CUPTI's) or the
# driver's frames: at 68a5e77 gpubpf read the process's mappings to trim them at that
# drain, found none, and left every kernel under fire_launch and CUPTI's dispatch (the
# H100's launch_loop and PyTorch step profiles).
if PRODUCER_EXIT_DLOPEN=$WL/inject/libproducer.so record_gpu exit_stacks --exact -- "$PROD" model 0.3 1000 "$MODEL"; then
	"$GPUBPF" convert "$TMP/exit_stacks.pb.gz" -o "$TMP/exit_stacks.folded" --format folded \
		--sample-type gpu_kernel_time 2>>"$TMP/exit_stacks.log"
	if [ -s "$TMP/exit_stacks.folded" ] && ! grep -v ';site_model_launch;cudaLaunchKernel_v7000;model_kernel() [0-9]*$' \
		"$TMP/exit_stacks.folded" | grep -q .; then
		pass "exit_stacks:device-time-under-the-call-site"
	else
		fail "exit_stacks:device-time-under-the-call-site" "$(cut -c1-300 "$TMP/exit_stacks.folded" | head -3 | tr '\n' ';')"
	fi
fi

# The launch-bound run again beside two CPU hogs on this 2-CPU machine: a window's switches
# are CUPTI's work on the watcher, and the watcher preempted by the hogs costs the job
# nothing. Timed in wall time they read 1.7-6.6 ms a window where they take 0.42-0.48 ms
# alone, and the budget spaced the windows 8 or 16 periods apart (3-19 windows in a run,
# too few for an interval in one); their time less the watcher's waits for a CPU
# (/proc/thread-self/schedstat) read 0.45-0.58 ms, a window every 1-2 periods. The windows
# are counted over the run (10 at least: 3.5 s of them at one in 4 periods holds 8), not
# read off the producer's last EVERY: gpubpf's last ticks, as the job exits, may space
# them out (every=16 at the exit of a run of 17 windows, CI at 83bd94a).
alone=$(sed -n "s/.*CUPTI set up and torn down, \([0-9.]*\) ms a window.*/\1/p" "$TMP/launch_bound.raw" 2>/dev/null)
hogs
run_model loaded 1000
rc=$?
unhog
if [ $rc = 0 ]; then
	loaded=$(sed -n "s/.*CUPTI set up and torn down, \([0-9.]*\) ms a window.*/\1/p" "$TMP/loaded.raw")
	wins=$(sed -n "s/^Comment: gpu: .* followed in \([0-9]*\) windows.*/\1/p" "$TMP/loaded.raw")
	if [ -n "$alone" ] && [ -n "$loaded" ] && [ -n "$wins" ] &&
		python3 -c "import sys; sys.exit(0 if float('$loaded') <= 2 * float('$alone') + 0.2 and $wins >= 10 else 1)"; then
		pass "loaded:switches-timed-without-preemption"
	else
		fail "loaded:switches-timed-without-preemption" "a window's switches ${loaded:-not said} ms beside two hogs, ${alone:-not said} ms alone; ${wins:-no} windows in 4 s"
	fi
fi
