#!/usr/bin/env bash
# make demo: profile the bundled demo workload and print where the time goes.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export HOME=${HOME:-/root}
G=$BUILD/gpubpf
out=$BUILD/demo.pb.gz
sudo_prefix=""
[ "$(id -u)" = 0 ] || sudo_prefix="sudo"

echo "== gpubpf record -o $out -- $BUILD/workloads/cpu_ratio 3"
$sudo_prefix "$G" record -F 499 -o "$out" -- "$BUILD/workloads/cpu_ratio" 3
echo
echo "== go tool pprof -top $out   (CPU time: leaf_a:leaf_b:leaf_c = 1:2:3)"
go tool pprof -symbolize=none -top -nodecount=12 "$out" 2>/dev/null
if [ -x "$BUILD/workloads/cuda/runtime_wl_shared" ] && [ -f tests/demo_cuda.sh ]; then
	bash tests/demo_cuda.sh
fi
echo
echo "Explore it: go tool pprof -http=:8080 $out   (flamegraph under View > Flame Graph)"
