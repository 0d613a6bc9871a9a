#!/usr/bin/env bash
# The GPU check bundle (make gpu-bundle), where there is no GPU: it must say so in one
# SKIP row and exit 0; and in its self-test (SELFTEST=1: the C workloads and launch_loop,
# which need no GPU) its rows must be there with the workloads' own counts, read back
# through the bundle's static gpubpf: the script works before it meets a GPU.
source "$(dirname "$0")/lib.sh"
need_root
B=$BUILD/gpu-bundle
if [ ! -e "$B/gpu_check.py" ]; then
	skip all "no $B (make gpu-bundle; built by make test where CUDA is installed)"
	exit 0
fi
size=$(du -sm "$B" | cut -f1)
if [ "$size" -lt 64 ]; then pass "bundle-under-64MiB:${size}MiB"; else fail "bundle-under-64MiB" "$size MiB"; fi
for f in gpubpf libgpubpf_inject.so libgpubpf_inject_nop1.so device_time_variants.sh gpu_check.py \
	gpu_common.py gpu_cost.py gpu_device.py gpu_traps.py train_loop.py step_bench.py workloads/launch_loop \
	workloads/runtime_wl_shared workloads/runtime_wl_static workloads/driver_wl workloads/cpu_handoff \
	workloads/ret_delay launch_step.py step_ops.py kentry_step.py user_counters.py; do
	[ -e "$B/$f" ] || fail "bundle-has:$f" "missing"
done
for f in gpubpf workloads/ret_delay; do
	if file "$B/$f" | grep -q "statically linked"; then pass "bundle-static:$f"; else fail "bundle-static:$f" "$(file "$B/$f")"; fi
done
# the rows that need a GPU never run here: every name their code uses must be defined
out=$(python3 tests/e2e/py_names.py "$B"/*.py 2>&1) && pass "bundle-python-names-defined" ||
	fail "bundle-python-names-defined" "$(echo "$out" | head -5 | tr '\n' ';')"

OUT=$TMP/skip python3 "$B/gpu_check.py" >"$TMP/skip.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ "$(wc -l <"$TMP/skip/results.tsv")" = 1 ] && grep -q "SKIP" "$TMP/skip/results.tsv" &&
	grep -q "no nvidia-smi\|nvidia-smi -L fails" "$TMP/skip/results.tsv"; then
	pass "no-gpu-one-skip-row"
else
	fail "no-gpu-one-skip-row" "rc=$rc: $(cat "$TMP/skip/results.tsv" 2>/dev/null | tr '\n' ';')"
fi

OUT=$TMP/self SELFTEST=1 LD_LIBRARY_PATH=$PWD/$BUILD/workloads/cuda/stubs python3 "$B/gpu_check.py" >"$TMP/self.log" 2>&1
R=$TMP/self/results.tsv
row() { awk -F'\t' -v w="$1" '$2 == w { print $3 "|" $5 }' "$R"; }
# row_like ID CHECK ERE: the row CHECK's "value|verdict" matches ERE
row_like() {
	local got
	got=$(row "$2")
	if echo "$got" | grep -Eq "$3"; then pass "$1"; else fail "$1" "'$got'"; fi
}
for wl in runtime_wl_shared runtime_wl_static; do
	got=$(row "unnamed launches, $wl")
	[ "$got" = "0 of 180|PASS" ] && pass "selftest:names:$wl" || fail "selftest:names:$wl" "'$got'"
	# no GPU here: no device time, and the row says how many kernels there were to time
	got=$(row "device time of a short program, $wl")
	[ "$got" = "0 of 180 kernels|FAIL" ] && pass "selftest:device-row:$wl" || fail "selftest:device-row:$wl" "'$got'"
done
got=$(row "unnamed launches, driver_wl")
[ "$got" = "0 of 109|PASS" ] && pass "selftest:names:driver_wl" || fail "selftest:names:driver_wl" "'$got'"
# issue 13's estimate rows: the estimate, the truth, the interval and the delay's share,
# read back from the bundle's own report (their verdicts need a GPU's launches)
for id in thread-paced device-paced; do
	case $id in
	thread-paced) name="launch_loop (the thread sets the pace)" ;;
	*) name="launch_loop --device-us 20 (a full device queue sets the pace)" ;;
	esac
	row_like "selftest:estimate-row:$id" "estimate, $name" \
		'^[0-9]+ of (2000000|400000) \([+-][0-9.]+%\), CI [0-9]+-([0-9]+|unbounded), delay pushed [0-9.]+ \([0-9.]+-[0-9.]+\); device [a-z-]+\|(PASS|FAIL)$'
done
# what a call's work costs the job beyond its run time, measured in the thread-paced run
# by one counted call in 8 skipping its work (GPUBPF_BARE_EVERY), read from its report; or,
# where the windows held fewer bare calls than it is measured from (EST_BARE_MIN, 200), how
# many they held: at the default budget a host whose traps are dear (a traced call 7 us, the
# twenty-ninth session's) has shorter windows, and a CI run there had 172 (e2e 65 checks the
# measurement itself, at a budget that gives it enough)
row_like "selftest:work-row" "a call's work: its cost to the job beyond its run time (1 in 8 bare), launch_loop" \
	'^([0-9.]+ us a call \([0-9.]+-[0-9.]+\), a gap after a bare call -?[0-9.]+ us shorter, its program -?[0-9.]+|too few gaps after bare calls \([0-9]+\))\|INFO$'
# each mode's ratio, with gpubpf's estimate beside the measured slowdown (the Python-driven
# step, through ctypes, stands in for PyTorch's); and what a launch costs under --exact in
# kernel and in user time beside gpubpf's estimate of a hit
E=' (est\. [0-9.e+-]*%, meas\. [0-9.e+-]*%)'
for wl in "launch_loop" "launch-bound Python step (ctypes)"; do
	if grep -q "^6	throughput, $wl (medians of 1)	alone [0-9]*/s, default [0-9.]*$E, default+device time [0-9.]*$E, --exact [0-9.]*$E	" "$R"; then
		pass "selftest:throughput-row:${wl%% *}"
	else
		fail "selftest:throughput-row:${wl%% *}" "$(grep "throughput, $wl" "$R")"
	fi
	row_like "selftest:hit-split-row:${wl%% *}" "a launch under --exact, $wl: its cost in kernel and user time" \
		'^\+[0-9.]+ us: [0-9.]+ us kernel, -?[0-9.]+ us user \(the job.s own code after each hit\); est\. [0-9.]+ us a hit\|INFO$'
done
# the launching thread's user-mode instructions and cycles a launch (the CPU's counters,
# none on a VM without a virtual PMU: then a SKIP row that says why)
for wl in "launch-bound Python step (ctypes)" launch_loop; do
	row_like "selftest:user-work-row:${wl%% *}" "a launch's instructions and cycles in user mode, $wl" \
		'^(alone [0-9]+ instructions, [0-9]+ cycles; default x[0-9.]+, x[0-9.]+ \([+-][0-9]+ cycles\); --exact x[0-9.]+, x[0-9.]+ \([+-][0-9]+ cycles\)\|INFO|no user-mode counters here \([A-Za-z ]+\)\|SKIP)$'
done
# the counters' code itself, on software events every kernel has: a count that grows
# with the work between two reads, per unit
got=$(cd "$B" && python3 -c '
import user_counters as u
c = u.UserCounters(u.SOFTWARE)
a = c.read(); sum(range(2000000)); b = c.read()
print(c.why, b[0] > a[0] + 1e6, b[1] > a[1] + 1e6, c.fields(a, b, 10, "step").startswith("user_instr_per_step="),
      u.UserCounters(((1, 12345),)).fields(None, None, 1, "step"))' 2>&1)
[ "$got" = "None True True True user_instr_per_step=none(ENOENT)" ] && pass "selftest:user-counters" ||
	fail "selftest:user-counters" "'$got'"
# the row from counts as a machine with counters prints them (this VM has none): each
# mode's instructions and cycles against alone's, a launch being a step's 40
mkdir -p "$TMP/uw"
got=$(cd "$B" && OUT=$TMP/uw python3 -c '
import gpu_cost as c, gpu_common as g
o = lambda i, cy: "step_bench: steps=9 user_instr_per_step=%d user_cycles_per_step=%d" % (i, cy)
c.user_work("S", {"alone": [o(40000, 80000), o(40400, 80400)], "default": [o(40100, 82000)],
                  "--exact": [o(40200, 120000)]})
print("ROW " + g.rows[-1][2] + "|" + g.rows[-1][4])
l = lambda i, cy: "launch_loop: launches=9 user_instr_per_launch=%d user_cycles_per_launch=%d" % (i, cy)
c.user_work("L", {"alone": [l(3000, 9000)], "default": [l(3000, 9100)], "--exact": [l(3001, 10000)]})
print("ROW " + g.rows[-1][2] + "|" + g.rows[-1][4])' 2>/dev/null | sed -n 's/^ROW //p' | tr '\n' ';')
want="alone 1005 instructions, 2005 cycles; default x0.998, x1.022 (+45 cycles); --exact x1.000, x1.496 (+995 cycles)|INFO;"
want+="alone 3000 instructions, 9000 cycles; default x1.000, x1.011 (+100 cycles); --exact x1.000, x1.111 (+1000 cycles)|INFO;"
[ "$got" = "$want" ] && pass "selftest:user-work-counts" || fail "selftest:user-work-counts" "'$got'"
# what each thread's own sampling clock costs its switches: the hand-over pair's rates, the
# estimate, and when sampling went per CPU under the default budget
row_like "selftest:switches-row" "context switches, two threads handing work over (medians of 1)" \
	'^alone [0-9]+/s, own clocks [0-9]+/s \(meas\. [0-9.e+-]+%\), default [0-9]+/s \(meas\. [0-9.e+-]+%\), est\. with own clocks [0-9.e+-]+% \(up to [0-9.e+-]+%\), per CPU from [0-9.]+ s\|INFO$'
# where default mode's loss comes from, part by part (the PyTorch step on a GPU, launch_loop
# here): each mode's ratio with gpubpf's estimate beside it, and gpubpf's own CPU
P=' [0-9.]+ \(est\. [0-9.e+-]+%, meas\. [0-9.e+-]+%\)'
row_like "selftest:parts-row" "the loss part by part, launch_loop --spin-us 4 (medians of 1)" \
	"^alone [0-9]+/s, default$P, --no-python$P, -F 1$P, a tenth of the budget$P, gpubpf's CPU \(default\): recording [0-9.e+-]+ s, set-up [0-9.e+-]+ s, after [0-9.e+-]+ s\|INFO$"
# a return hit's whole cost to the job by its pace (ret_delay, a uprobe session), beside the
# return trap gpubpf books in the parts row's default profile, and a stack walk's
row_like "selftest:traps-row" "a return hit's whole cost to the job (trap, program, what its code paid): launch_loop --spin-us 4" \
	'^[0-9.]+ us \([0-9.]+-[0-9.]+\), its program [0-9.]+ us; a stall pushed [0-9.]+ of itself out \([0-9]+ gaps after one\); gpubpf books its trap at [0-9.]+ us \(calibrated\): x[0-9.]+; a user stack walk [0-9.]+ us whole \([0-9.]+-[0-9.]+\) against [0-9.]+ us run\|INFO$'
# what a system call (no probe) costs a Python step's code after it, and the host's kernel
# entry and counters: what a hit's uncounted user-side cost there is made of
row_like "selftest:kentry-row" "a system call's cost to a Python step's own code after it" \
	'^\+-?[0-9]+ ns of user time a call \(-?[0-9]+ to -?[0-9]+\) after a getppid of [0-9]+ ns in the kernel; [0-9]+ ns a call with none\|INFO$'
row_like "selftest:host-row" "the host (its kernel entry, its counters)" \
	'^kernel [^;]+; CPU counters: [^;]+; boot: [^;]+; spectre_v2: .+; CPU: [^;]+, (a hypervisor.s guest|bare metal); others: .+\|INFO$'
# a window thread that woke late: how late, how many never opened, and the longest each
# group's probes were in with no window open (a held thread once left them in a period)
row_like "selftest:windows-late-row" "launch_loop: CUDA windows opened late (by, in all), never opened; the longest each group's probes were in with no window open" \
	'^[0-9]+ \([0-9.e+-]+ ms\), [0-9]+; launches [0-9.e+-]+ ms, copies [0-9.e+-]+ ms, syncs [0-9.e+-]+ ms\|INFO$'
# a started command's holds at its exec and loads (a PyTorch import's start-up on a GPU)
row_like "selftest:holds-row" "launch_loop: start-up holds of the started command: how many, in all, the longest; the dynamic linker's calls let go with no hold" \
	'^[0-9]+, [0-9.]+ ms, [0-9.]+ ms; [0-9]+\|INFO$'
# the PyTorch loop's start-up line (train_loop.py prints it; no PyTorch here) as the
# start-up row reads it: the import and the driver's load added, a run without it left out
got=$(cd "$B" && OUT=$TMP/startup python3 -c '
import gpu_device as d
print(d.startup("a\ntrain_loop: start-up: import torch 2.345 s, the driver 0.512 s\nb"), d.startup("none"),
      d.startup(None))' 2>&1)
[ "$got" = "2.857 None None" ] && pass "selftest:startup-parse" || fail "selftest:startup-parse" "'$got'"
grep -q 'print(f"train_loop: start-up: import torch {' "$B/train_loop.py" && pass "selftest:startup-line" ||
	fail "selftest:startup-line" "train_loop.py prints no start-up line the row reads"
# item 14: the job ran under device time, and lived
got=$(row "the job survives device time: launch_loop --spin-us 4")
[ "$got" = "died in 0 of 1 runs|PASS" ] && pass "selftest:survives-row" || fail "selftest:survives-row" "'$got'"
[ -s "$TMP/self/throughput.txt" ] && [ -s "$TMP/self/table.txt" ] && pass "selftest:files" ||
	fail "selftest:files" "$(ls "$TMP/self")"

# GPU_CHECKS runs the named checks only (a session's 15 minutes of device time hold one
# full run, or two of a few checks): a name it does not know is refused before anything
# runs, with the names it knows
OUT=$TMP/bad GPU_CHECKS="programs nosuch" python3 "$B/gpu_check.py" >"$TMP/bad.log" 2>&1
rc=$?
if [ $rc -eq 2 ] && [ ! -e "$TMP/bad" ] && grep -q "GPU_CHECKS names no check nosuch; .* throughput " "$TMP/bad.log"; then
	pass "checks:unknown-refused"
else
	fail "checks:unknown-refused" "rc=$rc: $(tr '\n' ';' <"$TMP/bad.log")"
fi
OUT=$TMP/sel SELFTEST=1 GPU_CHECKS="pytorch,programs" LD_LIBRARY_PATH=$PWD/$BUILD/workloads/cuda/stubs \
	python3 "$B/gpu_check.py" >"$TMP/sel.log" 2>&1
got=$(awk -F'\t' '$1 != "all" && $1 != "6" && $2 !~ /^the host / { print $1 ":" $2 }' "$TMP/sel/results.tsv" 2>/dev/null |
	tr '\n' ';')
want="-:the checks run (GPU_CHECKS);2:unnamed launches, runtime_wl_shared;4:device time of a short program, runtime_wl_shared;"
want+="2:unnamed launches, runtime_wl_static;4:device time of a short program, runtime_wl_static;2:unnamed launches, driver_wl;"
if [ "$got" = "$want" ] && grep -q "	the checks run (GPU_CHECKS)	programs	" "$TMP/sel/results.tsv"; then
	pass "checks:only-those-named"
else
	fail "checks:only-those-named" "'$got'"
fi

# The check keeps to GPU_CHECK_SECONDS (a device call's limit is 600 s): with none left,
# every check is a SKIP row that says so, and the table is still written
OUT=$TMP/none SELFTEST=1 GPU_CHECK_SECONDS=0.001 python3 "$B/gpu_check.py" >"$TMP/none.log" 2>&1
rc=$?
n=$(grep -c "	not run: out of time (0 s of GPU_CHECK_SECONDS=0.001 left, it takes [0-9]* s or more)	time	SKIP$" \
	"$TMP/none/results.tsv" 2>/dev/null)
if [ $rc -eq 0 ] && [ "$n" = 8 ] && [ -s "$TMP/none/table.txt" ]; then
	pass "time:none-left-skips-each"
else
	fail "time:none-left-skips-each" "rc=$rc n=$n: $(tr '\n' ';' <"$TMP/none/results.tsv" 2>/dev/null)"
fi
# a round more only where the last round's time is left beside what the checks after it keep
got=$(cd "$B" && OUT=$TMP/none python3 -c '
import time, gpu_common as g
g.SECONDS, g.T0 = 100.0, time.monotonic()
now = time.monotonic()
g.reserve = 50.0
a = g.another_round(0, now)            # the first round always runs
b = g.another_round(1, now - 30)       # 30 s a round, 100 left, 50 kept: one more
c = g.another_round(1, now - 60)       # 60 s a round: no
d = g.another_round(1, now - 30, 25)   # 30 s, with 25 more kept for its own later cases: no
print(a, b, c, d)' 2>&1 | tail -1)
[ "$got" = "True True False False" ] && pass "time:another-round" || fail "time:another-round" "'$got'"
# SIGTERM (timeout's) ends it with the rows so far in the table, and a failing exit
OUT=$TMP/term SELFTEST=1 LD_LIBRARY_PATH=$PWD/$BUILD/workloads/cuda/stubs python3 "$B/gpu_check.py" \
	>"$TMP/term.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
	[ -s "$TMP/term/results.tsv" ] && [ "$(wc -l <"$TMP/term/results.tsv")" -ge 2 ] && break
	sleep 0.2
done
kill -TERM $pid
wait $pid
rc=$?
if [ $rc -eq 1 ] && grep -q "	stopped by SIGTERM after [0-9]* s: the rows so far	not stopped	FAIL$" "$TMP/term/results.tsv" &&
	grep -q "stopped by SIGTERM" "$TMP/term/table.txt"; then
	pass "time:sigterm-table"
else
	fail "time:sigterm-table" "rc=$rc: $(tr '\n' ';' <"$TMP/term/results.tsv" 2>/dev/null)"
fi

# The library's settings side by side (device_time_variants.sh), here with the stub driver
# (which loads no injection library): every variant runs and the summary says so, and
# the machine's core_pattern is as it was.
pattern=$(cat /proc/sys/kernel/core_pattern)
LD_LIBRARY_PATH=$PWD/$BUILD/workloads/cuda/stubs "$B/device_time_variants.sh" "$TMP/dtv" 1 0 >"$TMP/dtv.log" 2>&1
rc=$?
runs=$(grep -c "^[a-z_0-9]* run 1: rc 0$" "$TMP/dtv/summary.txt" 2>/dev/null)
if [ $rc -eq 0 ] && [ "$runs" = 3 ] && grep -q "^  no_finalize: 0$" "$TMP/dtv/summary.txt" &&
	[ "$(cat /proc/sys/kernel/core_pattern)" = "$pattern" ]; then
	pass "variants:each-runs"
else
	fail "variants:each-runs" "rc=$rc runs=$runs: $(tr '\n' ';' <"$TMP/dtv/summary.txt" 2>/dev/null)"
fi
