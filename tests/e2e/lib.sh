# Shared by the end-to-end tests (sourced). Each check prints one PASS/FAIL/SKIP line.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
BUILD=${BUILD:-build}
GPUBPF=$PWD/$BUILD/gpubpf
WL=$PWD/$BUILD/workloads
T=$(basename "$0" .sh)
export HOME=${HOME:-/root}
export GOFLAGS=-mod=mod GOTOOLCHAIN=local
TMP=$(mktemp -d "/tmp/gpubpf-$T.XXXXXX")
KILL_PIDS=()
cleanup() {
	for p in "${KILL_PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$TMP"
}
trap cleanup EXIT

# Two CPU hogs (cpu_ratio, 60 s at most) on this 2-CPU machine, a loaded host's stand-in;
# unhog stops them.
HOGS=()
hogs() {
	for _ in 1 2; do
		"$WL/cpu_ratio" 60 >/dev/null &
		HOGS+=($!)
		KILL_PIDS+=($!)
	done
}
unhog() {
	kill "${HOGS[@]}" 2>/dev/null
	wait "${HOGS[@]}" 2>/dev/null
	HOGS=()
}

pass() { echo "PASS $T:$1"; }
fail() { echo "FAIL $T:$1: $2"; }
skip() { echo "SKIP $T:$1: $2"; }

# check NAME CMD...: PASS when the command succeeds.
check() {
	local name=$1
	shift
	if "$@"; then pass "$name"; else fail "$name" "command failed: $*"; fi
}

# Root and BPF are needed for recording; say so loudly and skip everything otherwise.
need_root() {
	if [ "$(id -u)" != 0 ]; then
		skip all "recording needs root (CAP_BPF, CAP_PERFMON): run make test as root"
		exit 0
	fi
	if [ ! -r /sys/kernel/btf/vmlinux ]; then
		skip all "this kernel has no BTF (/sys/kernel/btf/vmlinux): gpubpf cannot load here"
		exit 0
	fi
}

need_go() {
	if ! command -v go >/dev/null; then
		skip all "go is missing: go tool pprof is the consumer we test against (make deps installs golang-go)"
		exit 0
	fi
}

pprof() { go tool pprof -symbolize=none "$@" 2>"$TMP/pprof.err"; }

# Start a workload held at its gate (GPUBPF_WL_WAIT=1); sets WL_PID, WL_IN (fd to release it).
start_gated() {
	local fifo="$TMP/gate.$RANDOM"
	mkfifo "$fifo"
	GPUBPF_WL_WAIT=1 "$@" <"$fifo" >"$TMP/wl.out" 2>&1 &
	WL_PID=$!
	KILL_PIDS+=("$WL_PID")
	exec {WL_IN}>"$fifo"
	# wait for "ready"
	for _ in $(seq 100); do grep -q ready "$TMP/wl.out" 2>/dev/null && return 0; sleep 0.05; done
	return 1
}
release_gated() { echo go >&"$WL_IN"; exec {WL_IN}>&-; }

# gpubpf writes its pid to $GPUBPF_READY_FILE once every probe is in (tests only).
export GPUBPF_READY_FILE=$TMP/gpubpf.ready

# Wait until gpubpf (pid $1) is recording with every probe in place.
wait_attached() {
	local pid=$1
	for _ in $(seq 400); do
		if [ "$(cat "$GPUBPF_READY_FILE" 2>/dev/null)" = "$pid" ]; then
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.025
	done
	return 1
}

# record_gpu NAME ARGS...: `gpubpf record -o $TMP/NAME.pb.gz ARGS` (the caller's environment
# as it is) within 120 s, checked to exit 0 (NAME:record-exit0); leaves
# $TMP/NAME.{log,pb.gz,raw} and prints the device-time comments and the producer's truth.
record_gpu() {
	local name=$1
	shift
	if timeout 120 "$GPUBPF" record -o "$TMP/$name.pb.gz" "$@" >"$TMP/$name.log" 2>&1; then
		pass "$name:record-exit0"
	else
		fail "$name:record-exit0" "$(tail -3 "$TMP/$name.log" | tr '\n' ';')"
		return 1
	fi
	pprof -raw "$TMP/$name.pb.gz" >"$TMP/$name.raw"
	grep -E 'Comment: gpu|^producer:' "$TMP/$name.raw" "$TMP/$name.log" | sed "s|^|$name: |" | cut -c1-400
}

# gpubpf's own calibration of a probe hit here (record -v), with every hit held ENTRY_NS
# and RET_NS more (GPUBPF_TEST_TRAP_NS, _RET_NS; default none): "traced entry program
# return", in us; nothing where it cannot be read.
calibration() { # [ENTRY_NS RET_NS]
	GPUBPF_TEST_TRAP_NS=${1:-${GPUBPF_TEST_TRAP_NS:-0}} GPUBPF_TEST_TRAP_RET_NS=${2:-${GPUBPF_TEST_TRAP_RET_NS:-0}} \
		"$GPUBPF" record -v -o "$TMP/calibration.pb.gz" -- sleep 0.1 2>&1 |
		sed -n 's/.*calibration: a traced call \([0-9.]*\) us (entry trap \([0-9.-]*\), program \([0-9.-]*\), return \([0-9.-]*\)).*/\1 \2 \3 \4/p' |
		head -1
}

# The host's traced call (us), by that calibration: this workplace's hosts differ
# threefold, 1.6-2.3 us on one kind and 7.0-7.6 on another, the same kernel
# (docs/BENCHMARKS.md, the twenty-ninth and thirtieth sessions), and a CI run lands on
# either. Cached for the script; 2 where it cannot be read.
host_hit_us() {
	if [ ! -s "$TMP/host_hit_us" ]; then
		calibration | awk '{ print $1 }' >"$TMP/host_hit_us"
		[ -s "$TMP/host_hit_us" ] || echo 2 >"$TMP/host_hit_us"
	fi
	cat "$TMP/host_hit_us"
}

# How much the thread-paced loops of the estimate tests are stretched on this host: they
# were sized where a traced call costs 2 us, a 4 us spin a launch (the probes about a third
# of the thread's time in a window, so that the delay they add back is half the window's
# calls). Where a traced call costs H us (more), a spin of 4 H/2 keeps that share, and a
# stand-in device's time a kernel the same multiple of the spin; the counts shrink by it,
# so that the runs last as long. Where the probes cost more than the spin, what the calls
# would have been without them cannot be told (e2e 61's 40 ns loop: an interval unbounded
# above, and it says why), and a test of how well the delay is added back has nothing to
# test. 1 on a host like the one the tests were sized on (a traced call under 2.5 us).
hit_scale() {
	awk -v h="$(host_hit_us)" 'BEGIN { s = h < 2.5 ? 1 : h / 2; printf "%.2f\n", s }'
}

# scaled X S: X times S, for a spin or a device's time (us)
scaled() { awk -v x="$1" -v s="$2" 'BEGIN { printf "%.2f\n", x * s }'; }
# shrunk N S: the count N over S, whole
shrunk() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%d\n", n / s }'; }
