#!/usr/bin/env bash
# Overhead budget: --exact counts exactly; the default mode attaches the launch probes in
# windows and its scaled estimate per call site is within 5% of the exact count on a
# steady launch rate (windows of a 0.2 s period instead of 1 s, so a few seconds hold
# as many windows as half a minute would).
source "$(dirname "$0")/lib.sh"
need_root
need_go
if [ "${HAVE_CUDA:-}" != 1 ] || [ ! -x "$WL/cuda/steady_launch" ]; then
	skip all "CUDA is not installed here (no nvcc/libcudart): the budget governs CUDA probes"
	exit 0
fi
TICKS=12000 # 6 s at 2000 ticks/s: site_a 3 launches a tick, site_b 1

site_count() { # file, site: launches under that call site
	pprof -sample_index=cuda_launches -top -nodecount=50 "$1" | awk -v s="$2" '$6 == s {print $4}'
}

"$GPUBPF" record --exact -o "$TMP/exact.pb.gz" -- "$WL/cuda/steady_launch" $TICKS 2000 >"$TMP/exact.out" 2>"$TMP/exact.err"
a=$(site_count "$TMP/exact.pb.gz" site_a)
b=$(site_count "$TMP/exact.pb.gz" site_b)
if [ "$a" = $((3 * TICKS)) ] && [ "$b" = "$TICKS" ]; then
	pass "exact-counts"
else
	fail "exact-counts" "site_a=$a (want $((3 * TICKS))) site_b=$b (want $TICKS)"
fi
pprof -raw "$TMP/exact.pb.gz" | grep -q 'Comment: cuda: exact counts (--exact)' && pass "exact-comment" ||
	fail "exact-comment" "$(pprof -raw "$TMP/exact.pb.gz" | grep Comment)"

GPUBPF_WINDOW_PERIOD=0.2 "$GPUBPF" record -o "$TMP/def.pb.gz" -- "$WL/cuda/steady_launch" $TICKS 2000 \
	>"$TMP/def.out" 2>"$TMP/def.err"
within() { # got, want, pct
	python3 -c "import sys; g,w,p=map(float,sys.argv[1:]); sys.exit(0 if w>0 and abs(g-w)/w*100<=p else 1)" "$1" "$2" "$3"
}
for site in site_a site_b; do
	got=$(site_count "$TMP/def.pb.gz" $site)
	want=$(site_count "$TMP/exact.pb.gz" $site)
	if [ -n "$got" ] && within "$got" "$want" 5; then
		pass "estimate-$site-within-5pct"
	else
		fail "estimate-$site-within-5pct" "estimated ${got:-none}, exact $want"
	fi
	echo "$site: estimated $got, exact $want"
done
raw=$(pprof -raw "$TMP/def.pb.gz" | grep Comment)
# The workload sleeps between ticks: its thread is sampled a few times a second of the
# clock (99 of its CPU time), and CPU sampling costs it those. Charged 99 a second, it took
# the whole 1% budget on a host whose samples cost ~60 us, the launches were held at their
# floor (0.2% of each period) and the estimates read +-8.5%, outside 5% in 2 of 6 runs.
rate=$(echo "$raw" | sed -n "s/.*us a sample, \([0-9.e+-]*\) samples a second of the most sampled target thread's time at -F 99.*/\1/p")
duty=$(echo "$raw" | sed -n 's/.*last duty cycles: launches \([0-9.e+-]*\)%.*/\1/p')
if [ -n "$rate" ] && [ -n "$duty" ] && python3 -c "import sys; sys.exit(0 if 0 < float('$rate') < 30 and float('$duty') > 1 else 1)"; then
	pass "cpu-sampling-as-taken"
else
	fail "cpu-sampling-as-taken" "samples a second '${rate}', launch duty '${duty}'%: $(echo "$raw" | grep 'cuda cost:')"
fi
echo "# a sleeping launcher: ${rate} samples a second, launches windowed ${duty}% of the time"
if echo "$raw" | grep -q 'sampled windows under a 1% overhead budget: .*last duty cycles: launches' &&
	echo "$raw" | grep -q 'cuda estimate: launches: .* 95% CI' &&
	echo "$raw" | grep -q 'cuda cost: estimated overhead'; then
	pass "windows-comment"
else
	fail "windows-comment" "$raw"
fi
# Fewer calls were traced than made: the windows really sampled.
traced=$(grep -o '[0-9]* CUDA calls traced in windows' "$TMP/def.err" | cut -d' ' -f1)
if [ -n "$traced" ] && [ "$traced" -lt $((4 * TICKS / 2)) ]; then
	pass "sampled-fewer-calls"
else
	fail "sampled-fewer-calls" "$(cat "$TMP/def.err")"
fi
grep -qE 'overhead ~[0-9.]+%' "$TMP/def.err" && pass "summary-overhead" || fail "summary-overhead" "$(cat "$TMP/def.err")"

# A bad budget is refused.
if "$GPUBPF" record --overhead-budget 0 -p 1 -o "$TMP/x.pb.gz" 2>"$TMP/bad.err"; then
	fail "bad-budget" "accepted 0"
else
	grep -q 'invalid --overhead-budget' "$TMP/bad.err" && pass "bad-budget" || fail "bad-budget" "$(cat "$TMP/bad.err")"
fi

# What a window costs besides its hits is measured in the job and said part by part. The
# probes are in a while with no window open (attaching waits for the kernel's grace period,
# 4-12 ms here; detaching too): in a launch loop every call then pays its trap and counts
# nowhere. Attaching the slowest attach seen, doubled, ahead of each window made that as
# much as the window itself (10 ms of probes a window against 5-10 ms in it); the kernel is
# now warmed ahead and the group attached at the window's start. The check: that part is
# said, measured, and at most a quarter of the probes' cost. And a CPU sample's cost is
# measured, not 0 (the rate of a loop sampled and not, best of two, read 0 on a loaded VM).
# A clean-clone make test once read 0.63% against 1.5% in hits, where 0.02-0.15% is usual
# (4 runs by hand): about 20 ms of probes in with no window open, once, as a window thread woken
# late on a loaded host or a detach held up would leave them (not found which). Such a run
# is tried again once.
for run in 1 2; do
	"$GPUBPF" record -o "$TMP/ll.pb.gz" -- "$WL/cuda/launch_loop" --seconds 3 >"$TMP/ll.out" 2>"$TMP/ll.err"
	cost=$(pprof -raw "$TMP/ll.pb.gz" | sed -n 's/^Comment: cuda cost: //p')
	echo "cost: $cost"
	parts=$(echo "$cost" | sed -n 's/.*probe hits \([0-9.e-]*\)% (.*; \([0-9.e-]*\)% of it with the probes in and no window open.*CPU sampling \([0-9.e-]*\)% (\([0-9.]*\) us a sample, .*/\1 \2 \3 \4/p')
	[ $run = 2 ] || [ -z "$parts" ] && break
	python3 -c "import sys; h, c, s = (float(x) for x in '$parts'.split()[:3]); sys.exit(0 if c <= 0.25 * h and h + s <= 1.3 else 1)" && break
	echo "# first run: the probes in with no window open over a quarter of their cost, or the run over 1.3% (below): run again once"
done
if [ -z "$parts" ]; then
	fail "cost-parts-said" "no probe hits / no window open / CPU sampling parts in: $cost"
else
	pass "cost-parts-said"
	set -- $parts
	if python3 -c "import sys; h, c = float('$1'), float('$2'); sys.exit(0 if 0 <= c <= 0.25 * h else 1)"; then
		pass "probes-in-no-window-small"
	else
		fail "probes-in-no-window-small" "$2% of the thread's time with the probes in and no window open, against $1% in probe hits"
	fi
	python3 -c "import sys; sys.exit(0 if float('$4') > 0 else 1)" && pass "cpu-sample-cost-measured" ||
		fail "cpu-sample-cost-measured" "a CPU sample costs $4 us"
fi

# A short job keeps to the budget too (the default 1% here; gpubpf's own CPU, apart). The
# plan is made from costs its windows measure, and the first ones read a job just started
# low: a 3 s launch loop spent 1.54-1.76% in probes and CPU sampling, 5 runs, its first
# period 10-20 ms over its 9 ms share. A period's overspend is now owed, and repaid from
# the next periods' budget: 0.94-1.11%, 5 runs. What the last periods owe is not repaid by
# the end; a loaded host's late windows add to it; hence 1.3%, and a second run (above).
# COST: a "cuda cost:" comment; SPENT: its probe hits and CPU sampling (%); true where the
# two are 1.3% at most
short_within() {
	spent=$(echo "$1" | sed -n 's/.*probe hits \([0-9.e-]*\)% (.*CPU sampling \([0-9.e-]*\)% (.*/\1 \2/p')
	[ -n "$spent" ] && python3 -c "import sys; sys.exit(0 if sum(map(float, '$spent'.split())) <= 1.3 else 1)"
}
if short_within "$cost"; then
	pass "short-job-within-budget"
else
	fail "short-job-within-budget" "probe hits and CPU sampling '${spent}'% of a 1% budget; $cost"
fi

# ... and so does it where traps cost 7-8 us a call (another kind of host of this
# workplace's, had on this one: GPUBPF_TEST_TRAP_NS, docs/DESIGN.md). The loop began 3-7 ms
# into its first 10 ms window, which read 27% of its thread in probes where it spent 90%,
# and the next window, planned from that, took 28 ms: 1.47-1.57% in 3 of 3 runs. A group's
# first window with calls is read from its busiest thread's first hit now: 1.0-1.2%.
if [ -n "${GPUBPF_TEST_TRAP_NS:-}${GPUBPF_TEST_TRAP_RET_NS:-}" ]; then
	skip "short-job-within-budget-dear-traps" "this run already emulates dear traps (above)"
else
	ok=""
	for run in 1 2; do
		GPUBPF_TEST_TRAP_NS=4300 GPUBPF_TEST_TRAP_RET_NS=900 "$GPUBPF" record -o "$TMP/dear.pb.gz" -- \
			"$WL/cuda/launch_loop" --seconds 3 >"$TMP/dear.out" 2>"$TMP/dear.err"
		cost=$(pprof -raw "$TMP/dear.pb.gz" | sed -n 's/^Comment: cuda cost: //p')
		short_within "$cost" && ok=1 && break
		# a loaded host's late windows add to it, as above
		echo "# first run: probe hits and CPU sampling '${spent}'%: run again once"
	done
	if [ -n "$ok" ]; then
		pass "short-job-within-budget-dear-traps"
	else
		fail "short-job-within-budget-dear-traps" "probe hits and CPU sampling '${spent}'% of a 1% budget; $cost"
	fi
fi

# A budget below what gpubpf needs at the least (CPU sampling at 99 Hz alone is 0.1-0.2%
# here, and each windowed group keeps 0.2% of every period): said while recording and in
# the profile, and the plan stays at those floors (device time, whose window costs
# milliseconds, came once a period where it should come as seldom as it can).
# The plan's part for probes in with no window open takes a window's rise at once and lets
# it fall by halves (governor.c), the figure beside it is the run's average: where the
# window thread woke late near the end (a loaded host) the plan reads more than the
# average (a clean clone's CI run: planned 0.774% against 0.285% + 0.18% + 0.3, 2 windows
# late by 15.7 ms): run again once there.
# LOW_WITHIN: record the low budget; true where its plan keeps to the floors
low_within() {
	"$GPUBPF" record --overhead-budget 0.01 -o "$TMP/low.pb.gz" -- "$WL/cuda/launch_loop" --seconds 2 \
		>"$TMP/low.out" 2>"$TMP/low.err"
	raw=$(pprof -raw "$TMP/low.pb.gz")
	cost=$(echo "$raw" | sed -n 's/^Comment: cuda cost: //p')
	planned=$(echo "$cost" | sed -n 's/.*; planned \([0-9.e+-]*\)% (over the 0.01% budget, held up by its floors.*/\1/p')
	# at the floors: CPU sampling as timed in this run (0.3-0.4% as a rule, 0.82% in a clean
	# clone's full run on a loaded host, where "under 1%" failed at 1.02%) and one windowed
	# group's 0.2%, give or take, with its windows' probes in and no window open as measured
	# in this run (a window's fixed cost: 0.02-0.04% as a rule, 0.27% on a loaded host, where
	# the window thread woke late after a window's end and the gate, exact since 95bd8e8,
	# counted the calls meanwhile in none); a window of device time a period would be several %
	cpu=$(echo "$cost" | sed -n 's/.*, CPU sampling \([0-9.e+-]*\)% (.*/\1/p')
	closed=$(echo "$cost" | sed -n 's/.*; \([0-9.e-]*\)% of it with the probes in and no window open.*/\1/p')
	late=$(echo "$raw" | sed -n 's/.*windows opened late: \([0-9]*\),.*/\1/p' | head -1)
	echo "# below the floors: planned ${planned}%, CPU sampling ${cpu}%, probes in with no window open ${closed}%, windows late ${late}"
	grep -q 'warning: the overhead budget of 0.01% is below what gpubpf needs at the least: CPU sampling at 99 Hz' \
		"$TMP/low.err" && [ -n "$planned" ] && [ -n "$cpu" ] && [ -n "$closed" ] &&
		python3 -c "import sys; sys.exit(0 if float('$planned') <= float('$cpu') + float('$closed') + 0.3 else 1)"
}
if low_within || { [ "${late:-0}" != 0 ] && echo "# late windows: run again once" && low_within; }; then
	pass "budget-below-floors-said"
else
	fail "budget-below-floors-said" "planned '${planned}'% against CPU sampling '${cpu}'% and probes in with no window open '${closed}'%, plus 0.3; $(echo "$raw" | grep -o 'windows opened late: .*'); $cost; $(grep -v '^launch_loop' "$TMP/low.err")"
fi

# A window thread held up (a loaded machine; here gpubpf stopped for 40 ms at random every
# 0.1-0.2 s): windows open late, some never. The probes put in for one that never opened
# come out as after a window; left in until the group's next window closed, up to a period
# (0.2 s) of a launch loop's calls paid their traps and counted nowhere (67% of its time in
# a CI run at 1 s periods). What it holds in now is a stop's 40 ms and an attach's or
# detach's few ms at most: 0.3-15 ms in 8 runs; before, 0.4-181 ms in 14 runs, over 75 ms
# in 4 of them (most misses are a slot's tail at a period's end, the next piece at the
# next one's start). So this is a guard against the gross failure, and a loaded host that
# stalls gpubpf more than the stops do gets a second run; the unit test windows_plan's
# missed_and_stood_in checks the rule itself.
held_run() {
	GPUBPF_WINDOW_PERIOD=0.2 "$GPUBPF" record --overhead-budget 0.01 -o "$TMP/held.pb.gz" -- \
		"$WL/cuda/launch_loop" --seconds 5 >"$TMP/held.out" 2>"$TMP/held.err" &
	local gp=$!
	sleep 0.3
	while kill -0 "$gp" 2>/dev/null; do
		sleep "0.$((RANDOM % 10 + 10))"
		kill -STOP "$gp" 2>/dev/null
		sleep 0.04
		kill -CONT "$gp" 2>/dev/null
	done
	wait "$gp"
	rc=$?
	held=$(pprof -raw "$TMP/held.pb.gz" | sed -n 's/^Comment: cuda: sampled windows .*; \(windows opened late: .*\)/\1/p')
	late=$(echo "$held" | sed -n 's/^windows opened late: \([0-9]*\),.*/\1/p')
	idle=$(echo "$held" | sed -n 's/.*no window open: launches \([0-9.e+-]*\) ms.*/\1/p')
	echo "# held up: $held"
	[ "$rc" = 0 ] && [ "${late:-0}" -gt 0 ] && [ -n "$idle" ] &&
		python3 -c "import sys; sys.exit(0 if float('$idle') < 75 else 1)"
}
if held_run || held_run; then
	pass "held-thread-probes-out"
else
	fail "held-thread-probes-out" "exit $rc; launches' probes in with no window open for up to '${idle}' ms (want under 75 ms); ${held:-no windows comment}; $(tail -3 "$TMP/held.err")"
fi
