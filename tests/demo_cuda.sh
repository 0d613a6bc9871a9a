#!/usr/bin/env bash
# The CUDA half of make demo: trace a bundled CUDA workload (no GPU needed: the calls
# fail fast, the probes fire) and show which kernels it launches from where.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
G=$BUILD/gpubpf
out=$BUILD/demo-cuda.pb.gz
wl=$BUILD/workloads/cuda/runtime_wl_shared
sudo_prefix=""
[ "$(id -u)" = 0 ] || sudo_prefix="sudo"
pp() { go tool pprof -symbolize=none "$@" 2>/dev/null; }

echo
# --exact: every call counted, so the numbers below match the workload's own summary
# line. Without it, hot probe groups are sampled within the 1% overhead budget and the
# counts are estimates (a short, bursty run like this one is their worst case).
echo "== gpubpf record --exact -o $out -- $wl   (CUDA runtime API traced by uprobes)"
GPUBPF_WL_REPEAT=10 $sudo_prefix "$G" record --exact -o "$out" -- "$wl"
echo
echo "== gpubpf report $out"
"$G" report --top 6 "$out"
echo
echo "== kernels by launches: go tool pprof -sample_index=cuda_launches -top $out"
pp -sample_index=cuda_launches -top -nodecount=8 "$out" | sed -n '/flat%/,$p'
echo
echo "== where launches come from: the program's own call sites (runtime frames hidden)"
echo "   go tool pprof -sample_index=cuda_launches -top -cum -hide='^(__|cudaLaunch|main\$)' $out"
pp -sample_index=cuda_launches -top -cum -nodecount=6 -hide='^(__|cudaLaunch|main$)' "$out" | sed -n '/flat%/,$p' |
	grep -v 'saxpy_kernel\|scale_kernel'
echo
echo "== bytes copied by direction: -sample_index=cuda_memcpy -top"
pp -sample_index=cuda_memcpy -top -nodecount=6 "$out" | sed -n '/flat%/,$p'
echo
echo "== GPU memory still allocated at the end: -sample_index=gpu_inuse -top"
pp -sample_index=gpu_inuse -top -nodecount=5 "$out" | sed -n '/flat%/,$p'
