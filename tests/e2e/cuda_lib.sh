# Helpers for the CUDA end-to-end tests (5x_cuda_*.sh), sourced after lib.sh.
# The expected numbers always come from the workload's own summary line
# ("name: key=value ..."), never from this file.

CUDA_WL=$WL/cuda
CUDA_STUBS=$CUDA_WL/stubs
CHECK="python3 tests/e2e/cuda_check.py"

# HAVE_CUDA comes from make (tests/run.sh exports it); run by hand, decide it the way
# the Makefile does.
if [ -z "${HAVE_CUDA+x}" ]; then
	HAVE_CUDA=$(test -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" &&
		test -e "${CUDA_HOME:-/usr/local/cuda}/lib64/libcudart.so" && echo 1)
fi

# need_cuda BIN...: skip the whole file, loudly, without CUDA or without the workloads.
need_cuda() {
	if [ "${HAVE_CUDA:-}" != 1 ]; then
		skip all "HAVE_CUDA=${HAVE_CUDA:-} (no nvcc/libcudart under ${CUDA_HOME:-/usr/local/cuda}): CUDA tracing tests NOT RUN"
		exit 0
	fi
	local b
	for b in "$@"; do
		if [ ! -x "$CUDA_WL/$b" ]; then
			skip all "workload $CUDA_WL/$b is missing: run 'make tools' (CUDA tracing tests NOT RUN)"
			exit 0
		fi
	done
	if [ ! -x "$GPUBPF" ]; then
		skip all "$GPUBPF is missing: run make"
		exit 0
	fi
	cq_start
}

# wl_summary FILE PREFIX: read the workload's "PREFIX: k=v k=v" line into S[k].
declare -gA S
wl_summary() {
	local line kv
	S=()
	line=$(grep -m1 "^$2: " "$1") || return 1
	for kv in ${line#*: }; do
		S[${kv%%=*}]=${kv#*=}
	done
	[ ${#S[@]} -gt 0 ]
}

# traces PROFILE INDEX OUT: go tool pprof -traces for one sample index, exact units.
traces() {
	local unit=
	case $2 in
	cuda_memcpy | gpu_alloc | gpu_inuse) unit=-unit=byte ;;
	cuda_sync_wait | cpu) unit=-unit=ns ;;
	esac
	pprof -traces -sample_index="$2" $unit "$1" >"$3"
}

# load_profile PROFILE DIR: the -traces output of every CUDA index in DIR/<index>.
load_profile() {
	local i
	mkdir -p "$2"
	for i in cuda_calls cuda_launches cuda_memcpy cuda_sync_wait gpu_alloc gpu_inuse; do
		traces "$1" "$i" "$2/$i" || return 1
	done
	pprof -raw "$1" >"$2/raw" || return 1
}

# One python process answers every query of a test file (python starts slowly here).
# Q CMD TRACES [filters...]: the answer of `cuda_check.py CMD TRACES filters...`, in $A.
# need_cuda starts it, in the test's own shell (a coproc started in $(...) is lost).
cq_start() {
	# It exits when this shell does (EOF on its stdin).
	coproc CQ { exec python3 -u tests/e2e/cuda_check.py serve; }
}
Q() {
	local IFS=$'\t'
	printf '%s\n' "$*" >&"${CQ[1]}"
	A=
	IFS= read -r A <&"${CQ[0]}"
}

# expect NAME GOT WANT [CONTEXT]: PASS when equal; otherwise FAIL with both numbers.
expect() {
	if [ "$2" = "$3" ]; then
		pass "$1"
	else
		fail "$1" "expected $3, got ${2:-nothing}${4:+ ($4)}"
	fi
}

# expect_ge NAME GOT MIN [CONTEXT]
expect_ge() {
	if [ -n "$2" ] && [ "$2" -ge "$3" ] 2>/dev/null; then
		pass "$1"
	else
		fail "$1" "expected >= $3, got ${2:-nothing}${4:+ ($4)}"
	fi
}

# qexpect NAME WANT CMD TRACES [filters...]: the query's answer must equal WANT; a
# failure shows the stacks with the same leaf/API function (up to 4).
qexpect() {
	local name=$1 want=$2 got
	shift 2
	Q "$@"
	got=$A
	if [ "$got" = "$want" ]; then
		pass "$name"
		return 0
	fi
	Q why "${@:2}"
	fail "$name" "expected $want, got ${got:-nothing} for '$*'; stacks with that leaf/API: $(awk -F' ;; ' '{for (i = 1; i <= NF && i <= 4; i++) printf "%s ;; ", $i}' <<<"$A")"
	return 1
}

# The profile's own account of CUDA tracing (its "cuda: ..." comment).
cuda_comment() { grep -m1 'Comment: cuda' "$1/raw" | sed 's/^ *Comment: //'; }
