#!/usr/bin/env bash
# gpubpf itself under ASan and UBSan (build/gpubpf-san, make tools): real recordings of the
# paths where gpubpf runs threads of its own or reads the target's memory, each checked
# for a clean exit and no sanitizer report. A race in gpubpf's teardown (two threads
# detaching USDT links of one BPF object through libbpf, which keeps no lock there) aborted
# CI's e2e 80 once with "realloc(): invalid next size", and showed 1 run in 12 here as
# built; under ASan it showed at the first run.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/cuda_lib.sh"
need_root
SAN=$PWD/$BUILD/gpubpf-san
PROD=$WL/inject/producer
MODEL=$WL/inject/libcupti_model.so
PRODLIB=$WL/inject/libproducer.so
LIB=$PWD/$BUILD/libgpubpf_inject.so
if [ ! -x "$SAN" ]; then
	skip all "$SAN is missing: run make tools"
	exit 0
fi
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0:exitcode=86 UBSAN_OPTIONS=print_stacktrace=1

# clean NAME RC LOG: the recording exited 0 and the sanitizers said nothing.
clean() {
	local report
	report=$(grep -m3 -A6 'ERROR: AddressSanitizer\|runtime error:\|ERROR: LeakSanitizer' "$3" | tr '\n' ';' | cut -c1-600)
	if [ "$2" = 0 ] && [ -z "$report" ]; then
		pass "$1"
	else
		fail "$1" "rc $2: ${report:-$(grep -v '^gpubpf: warning' "$3" | tail -3 | tr '\n' ';')}"
	fi
}

# The forked child's probe sites (e2e 80): a parent and a child each with the injection
# library's USDT links, all detached at the end. Three runs: the race was a timing.
if [ "${HAVE_CUDA:-}" = 1 ] && [ -e "$PRODLIB" ] && [ -e "$LIB" ]; then
	loc=$(readelf -n "$LIB" | grep -A1 'Name: launch$' | sed -n 's/.*Location: 0x\([0-9a-f]*\),.*/\1/p')
	for i in 1 2 3; do
		GPUBPF_INJECT_MAX_RATE=0 "$SAN" record --exact -o "$TMP/fork$i.pb.gz" -- \
			python3 tests/workloads/python/fork_child.py "$PRODLIB" "$(printf '%x' "0x${loc:-0}")" \
			>"$TMP/fork$i.log" 2>&1
		clean "fork-child-exact-$i" $? "$TMP/fork$i.log"
	done
else
	skip "fork-child-exact" "no CUDA headers or $PRODLIB missing (make tools)"
fi

# Device time in windows against the CUPTI model: the library's measurement and windows,
# gpubpf's window thread, its drains and the estimate; then report and convert read the
# profile back.
if [ "${HAVE_CUDA:-}" = 1 ] && [ -x "$PROD" ] && [ -e "$MODEL" ]; then
	GPUBPF_WINDOW_PERIOD=0.1 "$SAN" record --overhead-budget 5 -o "$TMP/model.pb.gz" -- \
		"$PROD" model 3 1000 "$MODEL" >"$TMP/model.log" 2>&1
	clean "cupti-model-windows" $? "$TMP/model.log"
	"$SAN" report "$TMP/model.pb.gz" >"$TMP/report.log" 2>&1
	clean "report" $? "$TMP/report.log"
	"$SAN" convert "$TMP/model.pb.gz" -o "$TMP/model.json" --format speedscope >"$TMP/convert.log" 2>&1
	clean "convert-speedscope" $? "$TMP/convert.log"
else
	skip "cupti-model-windows" "no CUDA headers or the CUPTI model missing (make tools)"
fi

# Attach to a running CUDA job (launches of a few microseconds, as real ones), then Ctrl-C:
# the attach path (the target's maps and ELF files read), the probes' windows, and the
# teardown on a signal.
if [ "${HAVE_CUDA:-}" = 1 ] && [ -x "$CUDA_WL/launch_loop" ]; then
	"$CUDA_WL/launch_loop" --seconds 8 --spin-us 4 >"$TMP/ll.out" 2>&1 &
	wl=$!
	KILL_PIDS+=("$wl")
	sleep 0.3
	"$SAN" record -p "$wl" -o "$TMP/attach.pb.gz" >"$TMP/attach.log" 2>&1 &
	rec=$!
	KILL_PIDS+=("$rec")
	sleep 3
	kill -INT "$rec"
	wait "$rec"
	clean "attach-then-sigint" $? "$TMP/attach.log"
	kill "$wl" 2>/dev/null
	wait "$wl" 2>/dev/null
else
	skip "attach-then-sigint" "no CUDA workloads (make tools)"
fi

# Python frames: CPython's memory read by BPF and by gpubpf, a launch-bound Python loop;
# with bare calls (GPUBPF_BARE_EVERY): their gaps' books, the calls they stand for, and
# the cost comment that says what their work costs the job.
CUDART=${CUDA_HOME:-/usr/local/cuda}/lib64/libcudart.so
if [ -e "$CUDART" ]; then
	GPUBPF_BARE_EVERY=8 "$SAN" record -o "$TMP/py.pb.gz" -- python3 tests/workloads/python/launch_step.py "$CUDART" 2 \
		>"$TMP/py.log" 2>&1
	clean "python-launch-step" $? "$TMP/py.log"
else
	skip "python-launch-step" "no $CUDART"
fi
