#!/usr/bin/env bash
# Device time in windows (issue 13): under a budget, the injection library measures in the
# job what CUPTI's activity and the launch probe add to a launch, then turns activity and
# its callbacks on only in one window a period, at the duty gpubpf's governor plans; each
# record counts 1/p of its window, corrected for the launches CUPTI's cost pushed past the
# window's end. No GPU: tests/workloads/inject/producer's "windows" mode drives the
# production path from two threads in bursts (work-bounded, as training steps are), its
# launches 5 us each and 3 us dearer while "CUPTI" has activity on (whose records exist
# only then, as with CUPTI). The truth is the producer's own count.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/cuda_lib.sh"
need_root
need_go
LIB=$PWD/$BUILD/libgpubpf_inject.so
PROD=$WL/inject/producer
if [ "${HAVE_CUDA:-}" != 1 ] || [ ! -e "$LIB" ] || [ ! -x "$PROD" ]; then
	skip all "no CUDA/CUPTI headers, or $LIB / $PROD missing (make tools): device-time windows NOT checked"
	exit 0
fi
cq_start

# One run: BUDGET, the producer for SECONDS; leaves $TMP/$name.{log,raw,pb.gz}.
run_windows() { # name budget seconds
	GPUBPF_WINDOW_PERIOD=0.1 record_gpu "$1" --overhead-budget "$2" -- "$PROD" windows "$3"
}

# What the comments say, against the producer's truth, checked in Python.
check_windows() { # name min_windows max_halfwidth_pct
	local name=$1
	python3 - "$TMP/$name.raw" "$TMP/$name.log" "$2" "$3" <<'PY' | sed "s/^\(PASS\|FAIL\) /\1 81_device_windows:$name:/"
import re, sys
raw, log, min_windows, max_half = open(sys.argv[1]).read(), open(sys.argv[2]).read(), int(sys.argv[3]), float(sys.argv[4])
num = lambda s: float(s.replace(",", ""))
def verdict(name, ok, why=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + why))
truth = re.search(r"producer: .*windowed_launches=(\d+) windowed_kernel_ns=(\d+)", log)
cost = re.search(r"gpu cost: device time in windows of ([0-9.e+-]+)% .*a launch costs ([0-9.]+) us more with it "
                 r"\(CUPTI's activity and the launch probe ([0-9.]+) us.* callbacks ([0-9.]+) us timed in them.*?\) "
                 r"against ([0-9.]+) us without; estimated overhead ([0-9.e+-]+)%", raw)
est = re.search(r"gpu estimate: kernels ([0-9,]+), 95% CI ([0-9,]+)-([0-9,]+) .*kernel time ([0-9.e+]+) ms, "
                r"95% CI ([0-9.e+]+)-([0-9.e+]+) ms .*from ([0-9,]+) device records seen in windows of (\d+) of (\d+)", raw)
gpu = re.search(r"Comment: gpu: .* in windows: (\d+) kernels .* of (\d+) launches and copies followed in (\d+) windows", raw)
if not (truth and cost and est and gpu):
    verdict("comments", False, f"truth {bool(truth)} cost {bool(cost)} estimate {bool(est)} gpu {bool(gpu)}")
    sys.exit()
t = int(truth[1])
duty, add, act, cb, base, over = (float(cost[i]) for i in range(1, 7))
k, lo, hi = num(est[1]), num(est[2]), num(est[3])
kt, ktlo, kthi = (float(est[i]) * 1e6 for i in (4, 5, 6))
# the cost measured in the job: 3 us of emulated activity plus the launch probe
verdict("cost-measured-in-job", 2.5 <= act <= 25, f"activity and probe {act} us (3 us emulated, plus the probe)")
verdict("launch-without-it", 3.5 <= base <= 15, f"a launch without device time {base} us (5 us emulated)")
verdict("windowed", 0 < duty < 100 and int(gpu[3]) >= min_windows, f"duty {duty}%, {gpu[3]} windows")
# every record seen is of a launch followed in a window (none under a stale window)
books = re.search(r"Comment: gpu: .*launches and copies followed in \d+ windows; (.*)", raw)
verdict("records-of-followed-launches", abs(int(gpu[1]) - int(gpu[2])) <= max(5, int(gpu[2]) // 100),
        f"{gpu[1]} records, {gpu[2]} launches followed; {books[1] if books else ''}")
verdict("truth-in-stated-interval", lo <= t <= hi, f"{t} launches, estimate {k:.0f} [{lo:.0f}, {hi:.0f}]")
verdict("kernel-time-in-stated-interval", ktlo <= t * 1000 <= kthi,
        f"{t * 1000} ns, estimate {kt:.0f} [{ktlo:.0f}, {kthi:.0f}]")
# the interval's two parts: CUPTI's cost at either end of its range brackets the estimate,
# and the windows' sampling goes around them (the cost measurement's kernels, counted once,
# in both: they were left out of the ends until 2026-12-07)
parts = re.search(r"gpu estimate: kernels [0-9,]+, 95% CI [0-9,]+-[0-9,]+ \(\+-[0-9.e+]+%: ([0-9,]+)-([0-9,]+) at "
                  r"either end of CUPTI's cost's range", raw)
verdict("interval-parts-bracket", parts is not None and lo <= num(parts[1]) <= k <= num(parts[2]) <= hi,
        f"estimate {k:.0f} [{lo:.0f}, {hi:.0f}], at either end of the cost {parts[1] if parts else ''}-"
        f"{parts[2] if parts else ''}")
half = 100 * (hi - lo) / 2 / k if k else 1e9
verdict("interval-useful", half <= max_half, f"+-{half:.0f}% (at most +-{max_half}%)")
print(f"# {t} launches, estimated {k:.0f} ({100 * (k / t - 1):+.1f}%), 95% CI +-{half:.0f}%; duty {duty}%; "
      f"CUPTI+probe {act} us, callbacks {cb} us, without {base} us; estimated overhead {over}%")
PY
}

# A 5% budget: windows long enough for an interval of a useful width in 4 s (20 windows
# at least: the first comes at gpubpf's first tick after the measurement's 100 ms warm-up,
# 1-2 s in). CUPTI's cost doubles this loop's launch in a window, so the launches it
# pushes out are as many as those seen and the interval is wide: +-50-64% in 11 runs on
# 2026-11-26 (the old bound of 60 failed 3 of them, before and after the one-off cost's
# repayment alike). A 95% interval misses the truth one run in twenty by design: a miss,
# or so wide an interval, is run again once, and the second run must hold it.
if run_windows b5 5 4; then
	check_windows b5 20 75 >"$TMP/b5.verdicts"
	if grep -q '^FAIL .*\(in-stated-interval\|interval-useful\)' "$TMP/b5.verdicts" && run_windows b5 5 4; then
		sed -n 's/^FAIL \(.*\(in-stated-interval\|interval-useful\)\): /# first run: \1: /p' "$TMP/b5.verdicts"
		check_windows b5 20 75 >"$TMP/b5.verdicts"
	fi
	cat "$TMP/b5.verdicts"
	# the profile's samples are the estimate the comment states
	got=$(pprof -traces -sample_index=gpu_kernel_time -unit=ns "$TMP/b5.pb.gz" | awk '/ns /{gsub("ns","",$1); s+=$1} END {printf "%.0f", s}')
	want=$(sed -n 's/.*gpu estimate: .*kernel time \([0-9.e+]*\) ms,.*/\1/p' "$TMP/b5.raw")
	python3 -c "import sys; g, w = float(sys.argv[1]), float(sys.argv[2]) * 1e6; sys.exit(0 if w > 0 and abs(g - w) <= 0.01 * w else 1)" \
		"${got:-0}" "${want:-0}" && pass "b5:profile-holds-the-estimate" ||
		fail "b5:profile-holds-the-estimate" "gpu_kernel_time sums to $got ns, the comment says $want ms"
	gpubpf_report=$("$GPUBPF" report "$TMP/b5.pb.gz" 2>&1)
	grep -q 'gpu estimate: kernels' <<<"$gpubpf_report" && pass "b5:report-shows-estimate" ||
		fail "b5:report-shows-estimate" "$(grep -i 'gpu' <<<"$gpubpf_report" | head -3 | tr '\n' ';')"
fi
# The default budget: its planned cost stays within it. In 3 s that is tight: what was
# spent once (16 ms) is not all repaid yet, and a window's switches, timed on the
# watcher's clock, came to 0.005-1.6 ms a window on this 2-vCPU VM where the producer's
# two threads keep both CPUs busy (0.41-0.99% in 10 runs, 1.15% and 1.25% now and then):
# a run over it is run again once, as an interval's miss is.
b1_over() {
	over=$(sed -n 's/.*gpu cost: .*estimated overhead \([0-9.e+-]*\)%.*/\1/p' "$TMP/b1.raw")
	python3 -c "import sys; sys.exit(0 if 0 < float(sys.argv[1]) <= 1.0 else 1)" "${over:-0}"
}
if run_windows b1 1 3; then
	if ! b1_over; then
		echo "# first run: device time estimated ${over:-?}%"
		run_windows b1 1 3
	fi
	b1_over && pass "b1:device-time-within-budget" || fail "b1:device-time-within-budget" "estimated ${over:-?}%"
fi
