#!/usr/bin/env bash
# Device-side time without a GPU: the injection library's own probes and join, end to end.
#   idle:     the library loads, InitializeInjection returns, the process runs on, with and
#             without a session; a session's end returns it to idle on its own (its watcher
#             sees the semaphores drop), and a session without the library says why
#   synth:    tests/workloads/inject/producer delivers CUPTI callbacks and CUPTI activity
#             records (known names, durations, devices, streams, a graph) from known call
#             sites through the library's production path; gpubpf must put the exact
#             durations under the right stacks as gpu_kernel_time / gpu_memcpy_time
# Expected numbers come from the producer's "producer: k=v ..." line.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/cuda_lib.sh"
need_root
need_go
LIB=$PWD/$BUILD/libgpubpf_inject.so
PROD=$WL/inject/producer
if [ "${HAVE_CUDA:-}" != 1 ] || [ ! -e "$LIB" ] || [ ! -x "$PROD" ]; then
	skip all "no CUDA/CUPTI headers, or $LIB / $PROD missing (make tools): device time tests NOT RUN"
	exit 0
fi
cq_start

# Until record.c drives userspace/trace/cupti.c, profiles have no "gpu:" comment: say so, loudly.
"$GPUBPF" record -d 0.5 -o "$TMP/probe.pb.gz" -- "$WL/cpu_fixed" >/dev/null 2>&1
if ! pprof -raw "$TMP/probe.pb.gz" | grep -q 'Comment: gpu:'; then
	skip all "gpubpf does not record device time yet (record.c does not call cupti__*): device time tests NOT RUN"
	exit 0
fi

# --- the library without a driver: loads, initializes, the process runs on
if timeout 20 "$PROD" idle 0.5 >"$TMP/idle.out" 2>&1 && grep -q 'idle: iterations=[1-9].* state=0 ' "$TMP/idle.out"; then
	pass "idle-no-session"
else
	fail "idle-no-session" "$(tr '\n' ';' <"$TMP/idle.out")"
fi

# --- a session attaches to a running process (-p): no driver, so CUPTI cannot attach;
# the job runs on, gpubpf says why, and after the session the library is idle again.
"$PROD" idle 5 >"$TMP/idle2.out" 2>&1 &
IDLE_PID=$!
KILL_PIDS+=("$IDLE_PID")
sleep 0.3
"$GPUBPF" record -d 2 -o "$TMP/idle.pb.gz" -p "$IDLE_PID" >"$TMP/idle-rec.log" 2>&1
rc=$?
wait "$IDLE_PID"
prc=$?
expect "idle-session-record-exit0" "$rc" 0 "$(tail -2 "$TMP/idle-rec.log" | tr '\n' ';')"
if [ "$prc" = 0 ] && grep -q 'idle: iterations=[1-9].* state=0 ' "$TMP/idle2.out"; then
	pass "idle-session-job-runs-on-and-returns-to-idle"
else
	fail "idle-session-job-runs-on-and-returns-to-idle" "rc=$prc: $(tr '\n' ';' <"$TMP/idle2.out")"
fi
pprof -raw "$TMP/idle.pb.gz" >"$TMP/idle.raw"
if grep -q 'gpu: device time unavailable: the injection library stayed idle: ' "$TMP/idle.raw"; then
	pass "idle-session-says-why"
else
	fail "idle-session-says-why" "$(grep -m2 'gpu:' "$TMP/idle.raw")"
fi
grep -q 'device time unavailable' "$TMP/idle-rec.log" && pass "idle-session-summary" ||
	fail "idle-session-summary" "$(tail -1 "$TMP/idle-rec.log")"

# --- a job that loaded its own libcupti (PyTorch does, from site-packages, without
# subscribing): the library uses that very copy, never a second one, and lets
# cuptiSubscribe decide; with no driver here it must say so, not blame another client.
mkdir -p "$TMP/site-packages/nvidia/cu13/lib"
cp "${CUDA_HOME:-/usr/local/cuda}/lib64/libcupti.so.13" "$TMP/site-packages/nvidia/cu13/lib/"
"$PROD" idle 4 "$TMP/site-packages/nvidia/cu13/lib/libcupti.so.13" >"$TMP/own.out" 2>&1 &
OWN_PID=$!
KILL_PIDS+=("$OWN_PID")
sleep 0.3
"$GPUBPF" record -d 1.5 -o "$TMP/own.pb.gz" -p "$OWN_PID" >"$TMP/own-rec.log" 2>&1
copies=$(grep -o '/[^ ]*libcupti[^ ]*' "/proc/$OWN_PID/maps" | sort -u)
wait "$OWN_PID"
pprof -raw "$TMP/own.pb.gz" >"$TMP/own.raw"
why=$(sed -n 's/.*Comment: gpu: device time unavailable: //p' "$TMP/own.raw" | head -1)
if [ "$copies" = "$TMP/site-packages/nvidia/cu13/lib/libcupti.so.13" ]; then
	pass "job-cupti:one-copy"
else
	fail "job-cupti:one-copy" "libcupti mapped from: $(echo $copies)"
fi
if echo "$why" | grep -q "another CUPTI"; then
	fail "job-cupti:not-another-client" "$why"
elif echo "$why" | grep -q "cuptiSubscribe: .*: no CUDA driver in this process"; then
	pass "job-cupti:says-why"
else
	fail "job-cupti:says-why" "'$why'"
fi

# --- a program over before the library's watcher would have looked (0.4 s of PyTorch
# start-up, or runtime_wl): followed from InitializeInjection on, and what "CUPTI" holds
# at exit is flushed and delivered.
if GPUBPF_INJECT_MAX_RATE=0 "$GPUBPF" record --exact -o "$TMP/short.pb.gz" -- "$PROD" short 20 >"$TMP/short.log" 2>&1 &&
	wl_summary "$TMP/short.log" producer; then
	got=$(pprof -sample_index=gpu_kernel_time -unit=ns -top "$TMP/short.pb.gz" | sed -n 's/.*Total samples = \([0-9]*\)ns.*/\1/p')
	n=$(pprof -raw "$TMP/short.pb.gz" | sed -n 's/.*device time from CUPTI .*: \([0-9]*\) kernels.*/\1/p')
	if [ "$got" = "${S[kernel_ns]}" ] && [ "$n" = "${S[kernels]}" ]; then
		pass "short-program:all-kernels"
	else
		fail "short-program:all-kernels" "${n:-0} kernels, ${got:-0} ns (want ${S[kernels]}, ${S[kernel_ns]})"
	fi
else
	fail "short-program:all-kernels" "$(tail -2 "$TMP/short.log" | tr '\n' ';')"
fi
# Without windows CUPTI's cost per launch is not measured: the summary beside its overhead
# and the report say so, with the launches it was on for (make bench's synthetic CUPTI
# under --exact: 0.2% estimated, 59% measured, and nothing said)
n=$(sed -n 's/.*what CUPTI.s activity and callbacks added to each of the \([0-9]*\) launches and copies it was on for, which only windows measure.*/\1/p' \
	<("$GPUBPF" report "$TMP/short.pb.gz" 2>&1))
if grep -q "overhead ~[0-9.e+-]*%.*, device time: .*; not in the overhead: CUPTI's cost to each launch it followed" \
	"$TMP/short.log" && [ -n "$n" ] && [ "$n" = "${S[kernels]}" ]; then
	pass "exact:cupti-cost-said-not-counted"
else
	fail "exact:cupti-cost-said-not-counted" "report count '${n}' (want ${S[kernels]}); $(grep -m1 'overhead' "$TMP/short.log")"
fi
# a timeline states no overhead, so nothing is said to be left out of one
GPUBPF_INJECT_MAX_RATE=0 "$GPUBPF" record --trace -o "$TMP/short.json" -- "$PROD" short 20 >"$TMP/short-trace.log" 2>&1
if grep -q "device time: ${S[kernels]} kernels" "$TMP/short-trace.log" && ! grep -q "overhead" "$TMP/short-trace.log"; then
	pass "trace:no-overhead-said"
else
	fail "trace:no-overhead-said" "$(tail -1 "$TMP/short-trace.log")"
fi

# --- a target without the library
"$GPUBPF" record -d 1 -o "$TMP/none.pb.gz" -- "$WL/cpu_fixed" >"$TMP/none.log" 2>&1
pprof -raw "$TMP/none.pb.gz" >"$TMP/none.raw"
grep -q 'gpu: device time unavailable: no target had the injection library loaded' "$TMP/none.raw" &&
	pass "no-library-says-why" || fail "no-library-says-why" "$(grep -m2 'gpu:' "$TMP/none.raw")"

# --- synthetic records through the production path, joined on correlation ids
check_synth() {
	local p=$1 r=$2 out=$TMP/$1.pb.gz log=$TMP/$1.log K=$TMP/$1.k M=$TMP/$1.m
	if GPUBPF_INJECT_MAX_RATE=0 "$GPUBPF" record --exact -o "$out" -- "$PROD" synth "$r" >"$log" 2>&1; then
		pass "$p:record-exit0"
	else
		fail "$p:record-exit0" "$(tail -3 "$log" | tr '\n' ';')"
	fi
	if ! wl_summary "$log" producer; then
		fail "$p:summary" "no 'producer:' line: $(tail -3 "$log" | tr '\n' ';')"
		return
	fi
	pprof -traces -sample_index=gpu_kernel_time -unit=ns "$out" >"$K" &&
		pprof -traces -sample_index=gpu_memcpy_time -unit=ns "$out" >"$M" || {
		fail "$p:pprof-reads-profile" "$(head -3 "$TMP/pprof.err" | tr '\n' ';')"
		return
	}
	qexpect "$p:kernel_a-time-under-site" "${S[kernel_a_ns]}" sum "$K" --leaf 'kernel_a' --api cudaLaunchKernel --under site_kernel_a --label cuda_device=0 --label cuda_stream=7
	qexpect "$p:kernel_b-time-under-site" "${S[kernel_b_ns]}" sum "$K" --leaf 'test::kernel_b' --api cuLaunchKernel --under site_kernel_b --under main --label cuda_device=1 --label cuda_stream=9
	qexpect "$p:graph-kernels-time" "${S[graph_ns]}" sum "$K" --leaf graph_node_kernel --api cudaGraphLaunch --under site_graph --label cuda_graph=42
	qexpect "$p:graph-label-only-on-graph" "${S[graph_ns]}" sum "$K" --label cuda_graph=42
	qexpect "$p:kernel-time-total" "${S[total_kernel_ns]}" sum "$K"
	qexpect "$p:htod-time" "${S[htod_ns]}" sum "$M" --leaf '[memcpy HtoD]' --api cudaMemcpyAsync --under site_copies --under main
	qexpect "$p:memset-time" "${S[memset_ns]}" sum "$M" --leaf '[memset]' --api cudaMemsetAsync --under site_copies
	qexpect "$p:copy-time-total" "${S[total_copy_ns]}" sum "$M"
	qexpect "$p:no-lost-stacks" 0 sum "$K" --leaf '[stack lost]'
	qexpect "$p:no-library-frames" 0 sum "$K" --under 'fire_launch'
	pprof -raw "$out" >"$TMP/$p.raw"
	local c
	c=$(grep -m1 'Comment: gpu:' "$TMP/$p.raw")
	echo "$p: $c"
	[[ $c == *" ${S[dropped]} records of unsampled launches dropped"* ]] && pass "$p:dropped-counted" ||
		fail "$p:dropped-counted" "expected ${S[dropped]} dropped: $c"
	[[ $c == *"device time from CUPTI"* ]] && pass "$p:comment" || fail "$p:comment" "$c"
	grep -q "device time: $((S[kernel_a] + S[kernel_b] + S[graph_kernels])) kernels" "$log" && pass "$p:summary-line" ||
		fail "$p:summary-line" "$(grep 'wrote' "$log")"
}

check_synth synth-r1 1
check_synth synth-r25 25

# --- the launch probe sits on a 5-byte nop: Linux 6.18's x86-64 uprobes turn one into a call
# to the kernel's uprobe trampoline at its first hit (a syscall, 0.27 us a trap here against
# 0.54-0.73 us for int3 on a 1-byte nop), and put the nop back when the probe goes. The call
# and the trampoline push below the stack pointer: the probes' file keeps no red zone.
loc=$(readelf -n "$LIB" | grep -A1 'Name: launch$' | sed -n 's/.*Location: 0x\([0-9a-f]*\),.*/\1/p')
loc=$(printf '%x' "0x${loc:-0}")
at=$(objdump -d --start-address=0x$loc --stop-address=$((0x$loc + 5)) "$LIB" 2>/dev/null | grep -m1 "^ *$loc:")
[[ $at == *"0f 1f 44 00 00"* ]] && pass "launch-probe-on-nop5" || fail "launch-probe-on-nop5" "at 0x$loc: ${at:-nothing}"
redzone=$(objdump -d "$BUILD/inject/core.o" | grep -cE -- '-0x[0-9a-f]+\(%rsp\)')
expect "probes-file-no-red-zone" "$redzone" 0 "$(objdump -d "$BUILD/inject/core.o" | grep -m3 -E -- '-0x[0-9a-f]+\(%rsp\)')"
if [ "$(uname -m)" = x86_64 ] && grep -qw arch_uprobe_optimize /proc/kallsyms; then
	probe_bytes() { # pid: the 5 bytes at the launch probe in the process's memory
		python3 tests/workloads/python/fork_child.py --probe-bytes "$1" "$loc"
	}
	# the job outlives the session (killed once read): its bytes are read before, during
	# the session (until the call is seen or the session ends) and after it
	"$PROD" loop 30 >"$TMP/nop5.out" 2>&1 &
	NOP5_PID=$!
	KILL_PIDS+=("$NOP5_PID")
	sleep 0.3
	before=$(probe_bytes "$NOP5_PID")
	GPUBPF_INJECT_MAX_RATE=0 "$GPUBPF" record --exact -d 2 -p "$NOP5_PID" -o "$TMP/nop5.pb.gz" >"$TMP/nop5.log" 2>&1 &
	REC_PID=$!
	during= trampoline=0
	while kill -0 "$REC_PID" 2>/dev/null; do
		sleep 0.1
		during=$(probe_bytes "$NOP5_PID")
		if [[ $during == e8* ]]; then
			trampoline=$(grep -c '\[uprobes-trampoline\]' "/proc/$NOP5_PID/maps")
			break
		fi
	done
	wait "$REC_PID"
	rc=$?
	after=$(probe_bytes "$NOP5_PID")
	kill "$NOP5_PID" 2>/dev/null
	wait "$NOP5_PID" 2>/dev/null
	if [ "$before" = 0f1f440000 ] && [[ $during == e8* ]] && [ "$trampoline" -ge 1 ] && [ "$after" = 0f1f440000 ] && [ $rc = 0 ]; then
		pass "launch-probe-optimized-while-attached"
	else
		fail "launch-probe-optimized-while-attached" "before $before, during $during ($trampoline trampolines), after $after, record rc $rc"
	fi
	# and what it records is the same: every followed launch under its call site
	pprof -traces -sample_index=gpu_kernel_time "$TMP/nop5.pb.gz" >"$TMP/nop5.traces" 2>&1
	grep -q 'loop_run' "$TMP/nop5.traces" && pass "launch-probe-optimized-stacks" ||
		fail "launch-probe-optimized-stacks" "$(head -20 "$TMP/nop5.traces" | tr '\n' ';')"
else
	skip "launch-probe-optimized-while-attached" "no optimized uprobes in this kernel (Linux 6.18+, x86-64)"
fi

# --- a child of fork() has the parent's probe sites, which may be calls into a trampoline
# Linux 6.18 does not map into it: without the library's guard a child that launched died
# of SIGSEGV. The child launches and exits normally (the library's atexit handler runs);
# the parent launches on.
PRODLIB=$WL/inject/libproducer.so
if [ -e "$PRODLIB" ]; then
	GPUBPF_INJECT_MAX_RATE=0 "$GPUBPF" record --exact -o "$TMP/fork.pb.gz" -- \
		python3 tests/workloads/python/fork_child.py "$PRODLIB" "$loc" >"$TMP/fork.log" 2>&1
	rc=$?
	got=$(sed -n 's/^fork_child.py: child \(.*\); parent after: \(.*\)/\1 \2/p' "$TMP/fork.log")
	before=$(sed -n 's/^fork_child.py: parent before fork: //p' "$TMP/fork.log")
	echo "# fork: the parent's probe $before; child and parent after: $got"
	if [ "$rc" = 0 ] && [ "${got% *}" = "exit 7" ]; then
		pass "forked-child-survives-probe-sites"
	else
		fail "forked-child-survives-probe-sites" "record rc $rc, child '${got% *}': $(grep -v '^gpubpf: warning' "$TMP/fork.log" | tail -3 | tr '\n' ';')"
	fi
fi

# --no-device-time: the summary says device time was left out as asked, not that the user
# should start the job with the library (what the H100's estimate rows were told).
"$GPUBPF" record --no-device-time -o "$TMP/nodev.pb.gz" -- "$WL/cuda/launch_loop" --seconds 0.2 >"$TMP/nodev.log" 2>&1
if grep -q "device time unavailable (the command was started without the injection library, as --no-device-time asks)" \
	"$TMP/nodev.log" && ! grep -q "start the job with" "$TMP/nodev.log"; then
	pass "no-device-time-said-as-asked"
else
	fail "no-device-time-said-as-asked" "$(grep wrote "$TMP/nodev.log" | cut -c1-300)"
fi

# --no-device-time where the target has the library already (the producer links it, as a
# job started with CUDA_INJECTION64_PATH has it): left idle, its probes never attached, no
# device time, and the summary says so.
MODEL=$WL/inject/libcupti_model.so
if [ -e "$MODEL" ]; then
	PRODUCER_ALONE=1 "$GPUBPF" record --no-device-time -o "$TMP/idle.pb.gz" -- "$PROD" model 1 1000 "$MODEL" \
		>"$TMP/idle.log" 2>&1
	rc=$?
	"$GPUBPF" convert "$TMP/idle.pb.gz" -o "$TMP/idle.folded" --format folded --sample-type gpu_kernel_time \
		>/dev/null 2>&1
	if [ "$rc" = 0 ] && [ -e "$TMP/idle.folded" ] && [ ! -s "$TMP/idle.folded" ] &&
		grep -q "device time unavailable (left out, as --no-device-time asks: the injection library in 1 target object stayed idle)" "$TMP/idle.log"; then
		pass "no-device-time-leaves-a-loaded-library-idle"
	else
		fail "no-device-time-leaves-a-loaded-library-idle" "rc $rc, $(wc -l <"$TMP/idle.folded" 2>/dev/null) kernel stacks: $(grep wrote "$TMP/idle.log" | cut -c1-300)"
	fi
fi
