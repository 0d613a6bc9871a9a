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
