#!/usr/bin/env bash
# In a real browser: speedscope's own web app (npm package speedscope, its built release)
# in Debian's chromium, headless, driven by playwright-core (tests/browser/
# speedscope_check.js). It loads a gpubpf pprof file (cpu_ratio) and a gpubpf speedscope
# file (runtime_wl_shared, converted), and checks from the page that each imported
# without an error and shows the expected frame names. The flame graphs are saved as
# $BUILD/browser/*.png for people to look at.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/cuda_lib.sh"
need_root

NM=$PWD/$BUILD/browser/node_modules
if ! command -v node >/dev/null; then
	skip all "node is missing (make deps installs nodejs): browser checks NOT RUN"
	exit 0
fi
if [ ! -x "${CHROMIUM:-/usr/bin/chromium}" ]; then
	skip all "${CHROMIUM:-/usr/bin/chromium} is missing (make deps installs Debian's chromium): browser checks NOT RUN"
	exit 0
fi
if [ ! -f "$NM/speedscope/dist/release/index.html" ] || [ ! -d "$NM/playwright-core" ]; then
	skip all "speedscope or playwright-core missing under $NM (make tools installs them with npm; see $BUILD/browser/npm.log): browser checks NOT RUN"
	exit 0
fi

specs=()
# a pprof file: CPU stacks of cpu_ratio (speedscope shows pprof's default type, samples)
if "$GPUBPF" record -F 499 -o "$TMP/cpu.pb.gz" -- "$WL/cpu_ratio" 2 >"$TMP/cpu.log" 2>&1; then
	pass "record-pprof"
	specs+=("$TMP/cpu.pb.gz::speedscope-pprof-cpu.png:leaf_a,leaf_b,leaf_c,parent_c,main")
else
	fail "record-pprof" "$(tail -3 "$TMP/cpu.log" | tr '\n' ';')"
fi
# a speedscope file: the CUDA workload's launches, kernels under their call sites
if [ "${HAVE_CUDA:-}" = 1 ] && [ -x "$CUDA_WL/runtime_wl_shared" ]; then
	if "$GPUBPF" record --exact -o "$TMP/rt.pb.gz" -- "$CUDA_WL/runtime_wl_shared" >"$TMP/rt.log" 2>&1 &&
		"$GPUBPF" convert "$TMP/rt.pb.gz" -o "$TMP/cuda.speedscope.json" 2>>"$TMP/rt.log"; then
		pass "record-convert-speedscope"
		specs+=("$TMP/cuda.speedscope.json:cuda_launches:speedscope-cuda-launches.png:saxpy_kernel<float>(int,saxpy_kernel<double>(int,gpubpf_demo::scale_kernel(float*,launch_a(int,launch_b(int,launch_c(int,cudaLaunchKernel")
	else
		fail "record-convert-speedscope" "$(tail -3 "$TMP/rt.log" | tr '\n' ';')"
	fi
else
	# without the CUDA workloads, the CPU profile in speedscope's format
	"$GPUBPF" convert "$TMP/cpu.pb.gz" -o "$TMP/cpu.speedscope.json" 2>"$TMP/conv.log" &&
		specs+=("$TMP/cpu.speedscope.json:cpu:speedscope-cpu.png:leaf_a,leaf_b,leaf_c,main")
	skip "cuda" "HAVE_CUDA=${HAVE_CUDA:-} or runtime_wl_shared missing: CUDA flame graph NOT CHECKED"
fi

mkdir -p "$BUILD/browser"
timeout 300 node tests/browser/speedscope_check.js "$NM" "$BUILD/browser" "${specs[@]}" 2>&1
rc=$?
[ "$rc" -eq 124 ] && fail "node" "speedscope_check.js timed out"
ls "$BUILD"/browser/*.png 2>/dev/null | sed 's/^/# screenshot: /'
