#!/usr/bin/env bash
# Device-side time on a real GPU (needs an NVIDIA driver, PyTorch with CUDA, root).
# Prints PASS/FAIL lines and a summary for docs/BENCHMARKS.md:
#   kernel names present with gpu_kernel_time
#   sum of gpu_kernel_time per loop iteration within 10% of torch.profiler's (separate run)
#   throughput with the library idle vs without it (target >= 0.99), and with a gpubpf
#   session attached in default mode (target >= 0.97)
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
GPUBPF=$PWD/$BUILD/gpubpf
LIB=$PWD/$BUILD/libgpubpf_inject.so
PY=${PYTHON:-python3}
SECS=${SECS:-20}
T=$(mktemp -d /tmp/gpubpf-gpu-dt.XXXXXX)
export GOFLAGS=-mod=mod GOTOOLCHAIN=local
pass() { echo "PASS device_time:$1"; }
fail() { echo "FAIL device_time:$1: $2"; }
if ! nvidia-smi -L >/dev/null 2>&1 || ! $PY -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
	echo "SKIP device_time:all: no GPU, driver or CUDA PyTorch here"
	exit 0
fi
W="$PY tests/gpu/device_time.py"
ips() { sed -n 's/.*ips=\([0-9.]*\).*/\1/p' "$1" | tail -1; }
iters() { sed -n 's/.*iters=\([0-9]*\).*/\1/p' "$1" | tail -1; }

$W loop "$SECS" >"$T/base.out" 2>&1
CUDA_INJECTION64_PATH=$LIB $W loop "$SECS" >"$T/idle.out" 2>&1
"$GPUBPF" record -o "$T/rec.pb.gz" -- $W loop "$SECS" >"$T/rec.out" 2>&1
$W events 10 >"$T/ev.out" 2>&1

base=$(ips "$T/base.out") idle=$(ips "$T/idle.out") rec=$(ips "$T/rec.out")
r_idle=$(echo "$idle / $base" | bc -l) r_rec=$(echo "$rec / $base" | bc -l)
printf 'throughput: base %s it/s, library idle %s (%.3f), recorded %s (%.3f)\n' "$base" "$idle" "$r_idle" "$rec" "$r_rec"
(($(echo "$r_idle >= 0.99" | bc -l))) && pass idle-throughput || fail idle-throughput "$r_idle < 0.99"
(($(echo "$r_rec >= 0.97" | bc -l))) && pass attached-throughput || fail attached-throughput "$r_rec < 0.97"

go tool pprof -symbolize=none -top -sample_index=gpu_kernel_time -unit=ns "$T/rec.pb.gz" >"$T/top" 2>&1
grep -qiE 'gemm|sgemm|conv|elementwise|vectorized' "$T/top" && pass kernel-names || fail kernel-names "$(head -20 "$T/top" | tr '\n' ';')"
go tool pprof -raw "$T/rec.pb.gz" 2>/dev/null | grep -m2 'Comment: gpu'
total=$(go tool pprof -symbolize=none -traces -sample_index=gpu_kernel_time -unit=ns "$T/rec.pb.gz" 2>/dev/null |
	awk '/^ +[0-9]+ns /{gsub("ns","",$1); s+=$1} END{print s+0}')
per_rec=$(echo "$total / $(iters "$T/rec.out")" | bc -l)
ev_kns=$(sed -n 's/.*kernel_ns=\([0-9]*\).*/\1/p' "$T/ev.out")
per_ev=$(echo "$ev_kns / $(iters "$T/ev.out")" | bc -l)
ratio=$(echo "$per_rec / $per_ev" | bc -l)
printf 'kernel time per iteration: gpubpf %.0f ns, torch.profiler %.0f ns (ratio %.3f)\n' "$per_rec" "$per_ev" "$ratio"
(($(echo "$ratio >= 0.9 && $ratio <= 1.1" | bc -l))) && pass kernel-time-within-10pct || fail kernel-time-within-10pct "ratio $ratio"
# Note: the recording covers warm-up too (kernels before the timed loop): a few iterations' worth.
rm -rf "$T"
