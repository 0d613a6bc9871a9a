#!/bin/bash
# Device time's windows on a real GPU, the library's settings side by side: which of them
# the job survives. At 68a5e77 `launch_loop --spin-us 4` under `gpubpf record` (device time
# in windows) died of SIGSEGV in 3 runs of 4 on an H100, and the PyTorch step of a broken
# heap in 1 of 6; the CUPTI model on the development machine never did. This script found
# why (2026-11-27, docs/DEVICE_TIME.md): the cuptiFinalize in a launch's exit callback, 9
# deaths in 24 runs whatever else was varied (1-byte nops, kineto's unsubscribe first, 200
# ms left alone after it), none in 6 without a finalize. Each variant runs RUNS times, the
# variants alternating, each run with the library's trace (GPUBPF_INJECT_DEBUG=2: CUPTI's
# set-up and teardown, the windows' switches, the cost measurement's phases) and gpubpf's
# -v; a run that dies leaves a core, and the first CORES of them get a backtrace of every
# thread (cuda-gdb, or gdb, where there is one).
#
#   base         the library as built (the finalize in the watcher's own driver call)
#   no_finalize  never cuptiFinalize: a window's end turns activity and callbacks off
#   nop1         the probes on sdt.h's 1-byte nop (an int3 trap), not the 5-byte nop the
#                kernel turns into a call to its trampoline
#
# usage (root, in the bundle): device_time_variants.sh OUTDIR [RUNS] [CORES]
# (CORES 0: the machine's core_pattern is left alone; else it is set for the run and put
# back after it)
# Writes OUTDIR/summary.txt (one line a run, then the deaths of each variant), the runs'
# logs and the backtraces. Exits 0 whatever the runs did: it measures, it does not judge.
set -u
H=$(cd "$(dirname "$0")" && pwd)
OUT=${1:?usage: device_time_variants.sh OUTDIR [RUNS] [CORES]}
RUNS=${2:-3}
CORES=${3:-2}
VARIANTS=(base no_finalize nop1)
mkdir -p "$OUT/cores" || exit 1
SUM=$OUT/summary.txt
: >"$SUM"

ulimit -c 4000000 2>/dev/null || true
# anonymous private memory (the stacks) and ELF headers: enough for a backtrace
echo 0x11 >/proc/self/coredump_filter 2>/dev/null || true
if [ "$CORES" -gt 0 ]; then
	OLD_PATTERN=$(cat /proc/sys/kernel/core_pattern 2>/dev/null)
	trap 'echo "$OLD_PATTERN" >/proc/sys/kernel/core_pattern 2>/dev/null' EXIT
	if ! echo "$OUT/cores/core.%p" >/proc/sys/kernel/core_pattern 2>/dev/null; then
		echo "note: /proc/sys/kernel/core_pattern is not writable: no backtraces" >>"$SUM"
	fi
fi
GDB=$(command -v cuda-gdb || command -v gdb || true)

env_of() {
	case $1 in
	no_finalize) echo GPUBPF_INJECT_FINALIZE=0 ;;
	*) echo GPUBPF_INJECT_VARIANT=$1 ;;
	esac
}

lib_of() {
	[ "$1" = nop1 ] && echo "$H/libgpubpf_inject_nop1.so" || echo "$H/libgpubpf_inject.so"
}

backtraces=0
one_run() { # variant run workload...
	local v=$1 r=$2 log rc died core
	shift 2
	log=$OUT/$v-$r.log
	rm -f "$OUT"/cores/core.*
	env GPUBPF_INJECT_DEBUG=2 "$(env_of "$v")" GPUBPF_INJECT_LIB="$(lib_of "$v")" \
		timeout 60 "$H/gpubpf" record -v -o "$OUT/$v-$r.pb.gz" -- "$@" >"$log" 2>&1
	rc=$?
	died=$(grep -o "killed by signal [0-9]*" "$log" | head -1)
	echo "$v run $r: rc $rc${died:+, $died}" >>"$SUM"
	core=$(ls "$OUT"/cores/core.* 2>/dev/null | head -1)
	if [ -n "$core" ] && [ -n "$GDB" ] && [ "$backtraces" -lt "$CORES" ]; then
		backtraces=$((backtraces + 1))
		timeout 60 "$GDB" -batch -nx -ex 'info threads' -ex 'thread apply all bt 40' -ex 'info registers' \
			-ex 'x/12i $pc-24' -ex 'info sharedlibrary' "$1" "$core" >"$OUT/$v-$r.backtrace.txt" 2>&1
	fi
	rm -f "$OUT"/cores/core.*
}

for r in $(seq 1 "$RUNS"); do
	# alternating, and each round in another order: the machine's state is no variant's
	for i in "${!VARIANTS[@]}"; do
		v=${VARIANTS[$(((i + r) % ${#VARIANTS[@]}))]}
		one_run "$v" "$r" "$H/workloads/launch_loop" --seconds 2 --spin-us 4
	done
done
{
	echo "deaths of launch_loop --spin-us 4 (2 s), by variant, of $RUNS runs:"
	for v in "${VARIANTS[@]}"; do
		echo "  $v: $(grep -c "^$v run .*killed by signal" "$SUM")"
	done
} >>"$SUM"
# The PyTorch step once, as built: why its cost measurement timed too few calls (-v and
# the trace say which phase ended it).
PY=${PYTHON:-python3}
if "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	one_run base step "$PY" "$H/step_bench.py" 2
fi
cat "$SUM"
exit 0
