#!/usr/bin/env bash
# CUDA driver API tracing, end to end: driver_wl against the stub libcuda.so.1
# (every call returns CUDA_ERROR_STUB_LIBRARY, uprobes fire all the same), recorded
# with `gpubpf record --`, read back with go tool pprof. Expected numbers come from
# driver_wl's summary line, and per-call byte sizes the summary does not split from
# the header comment of tests/workloads/cuda/driver_wl.c:
#   launches per CUfunction name (the names given to cuModuleGetFunction) and call
#   site, per launch entry point, the graph launch as [cuda graph], copies by
#   direction, memsets, allocations (gpu_alloc, gpu_inuse), syncs, stream labels.
# Then: a runtime call that goes on into the driver counts once -- runtime_wl with
# the stub libcuda.so.1 loaded (and probed) shows every call once, under the runtime
# function, and nothing under a driver function.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/cuda_lib.sh"
need_root
need_go
need_cuda driver_wl runtime_wl_static runtime_wl_shared
if [ ! -e "$CUDA_STUBS/libcuda.so.1" ]; then
	skip all "$CUDA_STUBS/libcuda.so.1 (link to the stub libcuda) is missing: run 'make tools'"
	exit 0
fi
WL_STREAM=0x5000 # driver_wl's stream s: the fake handle the stub leaves in place

# check_driver PREFIX REPEAT
check_driver() {
	local p=$1 r=$2 out=$TMP/$1.pb.gz d=$TMP/$1 log=$TMP/$1.log info
	if GPUBPF_WL_REPEAT=$r LD_LIBRARY_PATH=$CUDA_STUBS "$GPUBPF" record --exact -o "$out" -- "$CUDA_WL/driver_wl" >"$log" 2>&1; then
		pass "$p:record-exit0"
	else
		fail "$p:record-exit0" "$(tail -3 "$log" | tr '\n' ';')"
	fi
	if ! wl_summary "$log" driver_wl; then
		fail "$p:summary" "no 'driver_wl:' summary line: $(tail -3 "$log" | tr '\n' ';')"
		return
	fi
	if ! load_profile "$out" "$d"; then
		fail "$p:pprof-reads-profile" "$(head -3 "$TMP/pprof.err" | tr '\n' ';')"
		return
	fi
	info=$(cuda_comment "$d")
	echo "$p: $info"
	local L=$d/cuda_launches C=$d/cuda_calls M=$d/cuda_memcpy

	# --- launches per CUfunction name, call site and entry point
	qexpect "$p:cuLaunchKernel-drv_kernel_a-site_launch_a" "${S[launch_a]}" sum "$L" --leaf drv_kernel_a --api cuLaunchKernel --caller site_launch_a --under main
	qexpect "$p:cuLaunchKernel-drv_kernel_b-site_launch_b" "${S[launch_b]}" sum "$L" --leaf drv_kernel_b --api cuLaunchKernel --caller site_launch_b --under main
	qexpect "$p:cuLaunchKernel-total" "${S[launch]}" sum "$L" --api cuLaunchKernel
	qexpect "$p:cuLaunchKernelEx-drv_kernel_a" "${S[launch_ex]}" sum "$L" --leaf drv_kernel_a --api cuLaunchKernelEx --caller site_launch_ex --under main
	qexpect "$p:cuLaunchCooperativeKernel-drv_kernel_b" "${S[launch_coop]}" sum "$L" --leaf drv_kernel_b --api cuLaunchCooperativeKernel --caller site_launch_coop --under main
	qexpect "$p:cuGraphLaunch-cuda-graph" "${S[graph_launch]}" sum "$L" --leaf '[cuda graph]' --api cuGraphLaunch --caller site_graph --under main
	qexpect "$p:launches-total" $((S[launch] + S[launch_ex] + S[launch_coop] + S[graph_launch])) sum "$L"
	qexpect "$p:launches-all-named" 0 count "$L" --leaf '[cuda kernel*'
	# stream: launch_a on stream 0, the others on s
	qexpect "$p:no-stream-label-stream0" "${S[launch_a]}" sum "$L" --nolabel cuda_stream
	qexpect "$p:stream-label-launches" $((S[launch_b] + S[launch_ex] + S[launch_coop] + S[graph_launch])) sum "$L" --label cuda_stream=$WL_STREAM

	# --- copies by direction and entry point
	qexpect "$p:htod-bytes" "${S[htod_bytes]}" sum "$M" --leaf '[memcpy HtoD]' --api cuMemcpyHtoD_v2 --caller site_copies --under main
	qexpect "$p:htod-calls" "${S[htod]}" sum "$C" --api cuMemcpyHtoD_v2
	qexpect "$p:dtoh-bytes" "${S[dtoh_bytes]}" sum "$M" --leaf '[memcpy DtoH]' --api cuMemcpyDtoH_v2 --caller site_copies
	qexpect "$p:dtoh-calls" "${S[dtoh]}" sum "$C" --api cuMemcpyDtoH_v2
	qexpect "$p:dtod-bytes" "${S[dtod_bytes]}" sum "$M" --leaf '[memcpy DtoD]' --api cuMemcpyDtoD_v2 --caller site_copies
	qexpect "$p:dtod-calls" "${S[dtod]}" sum "$C" --api cuMemcpyDtoD_v2
	# cuMemcpy/cuMemcpyAsync: unified addressing, the direction is the driver's to find
	qexpect "$p:cuMemcpy-bytes-default" "${S[memcpy_bytes]}" sum "$M" --leaf '[memcpy default]' --api cuMemcpy --caller site_copies --nolabel cuda_stream
	qexpect "$p:cuMemcpyAsync-bytes-default" "${S[memcpy_async_bytes]}" sum "$M" --leaf '[memcpy default]' --api cuMemcpyAsync --label cuda_stream=$WL_STREAM
	qexpect "$p:htod-async-bytes" "${S[htod_async_bytes]}" sum "$M" --leaf '[memcpy HtoD]' --api cuMemcpyHtoDAsync_v2 --caller site_copies --label cuda_stream=$WL_STREAM
	qexpect "$p:htod-async-calls" "${S[htod_async]}" sum "$C" --api cuMemcpyHtoDAsync_v2
	qexpect "$p:dtoh-async-bytes" "${S[dtoh_async_bytes]}" sum "$M" --leaf '[memcpy DtoH]' --api cuMemcpyDtoHAsync_v2 --label cuda_stream=$WL_STREAM
	# memsets: elements x element size (driver_wl.c: N=1000 of 1, 2, 4 bytes; 100 x 4 async)
	qexpect "$p:memset-total-bytes" "${S[memset_bytes]}" sum "$M" --leaf '[memset]' --api 'cuMemset*' --caller site_memsets
	qexpect "$p:memset-calls" "${S[memset]}" sum "$C" --leaf '[memset]'
	qexpect "$p:cuMemsetD8-bytes" $((1000 * r)) sum "$M" --api cuMemsetD8_v2
	qexpect "$p:cuMemsetD16-bytes" $((2000 * r)) sum "$M" --api cuMemsetD16_v2
	qexpect "$p:cuMemsetD32-bytes" $((4000 * r)) sum "$M" --api cuMemsetD32_v2
	qexpect "$p:cuMemsetD32Async-bytes" $((400 * r)) sum "$M" --api cuMemsetD32Async --label cuda_stream=$WL_STREAM
	local copy_sum=$((S[htod_bytes] + S[dtoh_bytes] + S[dtod_bytes] + S[memcpy_bytes] + S[memcpy_async_bytes] + S[htod_async_bytes] + S[dtoh_async_bytes] + S[memset_bytes]))
	qexpect "$p:memcpy-total-bytes" "$copy_sum" sum "$M"

	# --- allocations
	qexpect "$p:gpu_alloc-cuMemAlloc" "${S[malloc_bytes]}" sum "$d/gpu_alloc" --api cuMemAlloc_v2 --caller site_allocs --under main
	qexpect "$p:cuMemAlloc-calls" "${S[malloc]}" sum "$C" --api cuMemAlloc_v2
	qexpect "$p:cuMemFree-calls" "${S[free]}" sum "$C" --api cuMemFree_v2
	qexpect "$p:gpu_inuse-total" "${S[inuse_bytes]}" sum "$d/gpu_inuse"
	qexpect "$p:gpu_inuse-cuMemAlloc" "${S[inuse_bytes]}" sum "$d/gpu_inuse" --api cuMemAlloc_v2 --caller site_allocs
	qexpect "$p:cuMemAllocAsync-calls" "${S[malloc_async]}" sum "$C" --api cuMemAllocAsync
	qexpect "$p:cuMemFreeAsync-calls" "${S[free_async]}" sum "$C" --api cuMemFreeAsync
	qexpect "$p:gpu_alloc-cuMemAllocAsync" $((512 * 1024)) sum "$d/gpu_alloc" --api cuMemAllocAsync --caller site_allocs
	qexpect "$p:gpu_inuse-cuMemAllocAsync-freed" 0 sum "$d/gpu_inuse" --api cuMemAllocAsync

	# --- syncs
	qexpect "$p:cuStreamSynchronize-calls" "${S[stream_sync]}" sum "$C" --leaf cuStreamSynchronize --api cuStreamSynchronize --caller site_syncs --under main
	qexpect "$p:cuCtxSynchronize-calls" "${S[ctx_sync]}" sum "$C" --leaf cuCtxSynchronize --api cuCtxSynchronize --caller site_syncs
	qexpect "$p:cuEventSynchronize-calls" "${S[event_sync]}" sum "$C" --leaf cuEventSynchronize --api cuEventSynchronize --caller site_syncs
	Q count "$d/cuda_sync_wait"
	expect_ge "$p:sync-wait-time-recorded" "$A" 1 "stacks with cuda_sync_wait > 0"

	# --- totals and stack shape
	local want=$((S[launch] + S[launch_ex] + S[launch_coop] + S[graph_launch] + S[htod] + S[dtoh] + S[dtod] + S[memcpy] + S[memcpy_async] + S[htod_async] + S[dtoh_async] + S[memset] + S[malloc] + S[free] + S[malloc_async] + S[free_async] + S[stream_sync] + S[ctx_sync] + S[event_sync]))
	qexpect "$p:cuda_calls-total" "$want" sum "$C"
	qexpect "$p:stacks-reach-main" "$want" sum "$C" --under main
	Q dups "$C"
	if [ -z "$A" ]; then
		pass "$p:no-duplicated-frames"
	else
		fail "$p:no-duplicated-frames" "CUDA stacks repeat their caller frame: $(awk -F' ;; ' '{printf "%d stacks, e.g. %s", NF, $1}' <<<"$A")"
	fi
	qexpect "$p:label-process_name" driver_wl labels "$C" --key process_name

	pprof -top -sample_index=cuda_launches "$out" >"$TMP/$p.top"
	local k
	for k in drv_kernel_a drv_kernel_b '[cuda graph]'; do
		grep -qF " $k" "$TMP/$p.top" && pass "$p:top-lists-$k" || fail "$p:top-lists-$k" "not in pprof -top -sample_index=cuda_launches: $(tr '\n' ';' <"$TMP/$p.top" | tail -c 600)"
	done
}

check_driver drv-r1 1
check_driver drv-r3 3

# A runtime call counts once even when the driver library is there and probed.
# (Here cudart only calls cuDriverGetVersion/cuGetExportTable/cuGetProcAddress_v2 of
# the stub, none traced -- docs/cuda-abi.md Q2; tests/gpu checks a real driver.)
check_runtime_over_driver() {
	local p=$1 bin=$2 out=$TMP/$1.pb.gz d=$TMP/$1 log=$TMP/$1.log info
	if LD_LIBRARY_PATH=$CUDA_STUBS "$GPUBPF" record --exact -o "$out" -- "$CUDA_WL/$bin" >"$log" 2>&1; then
		pass "$p:record-exit0"
	else
		fail "$p:record-exit0" "$(tail -3 "$log" | tr '\n' ';')"
	fi
	if ! wl_summary "$log" runtime_wl || ! load_profile "$out" "$d"; then
		fail "$p:profile" "no summary line or unreadable profile: $(tail -3 "$log" | tr '\n' ';')"
		return
	fi
	info=$(cuda_comment "$d")
	echo "$p: $info"
	# the stub was loaded by cudart and probed: cudart's object plus libcuda.so.1
	[[ $info == *" in 2 objects"* ]] && pass "$p:driver-library-probed" ||
		fail "$p:driver-library-probed" "expected probes in 2 objects (cudart + stub libcuda.so.1): $info"
	local L=$d/cuda_launches C=$d/cuda_calls
	qexpect "$p:launches-once" "${S[launch]}" sum "$L"
	qexpect "$p:launches-under-cudaLaunchKernel" "${S[launch]}" sum "$L" --api cudaLaunchKernel
	local k
	for k in 'cuLaunch*' 'cuMem*' 'cuStream*' 'cuCtx*' 'cuEvent*' 'cuGraph*'; do
		qexpect "$p:no-driver-frames-${k%\*}" 0 sum "$C" --api "$k"
	done
	local want=$((S[launch] + S[memcpy] + S[memcpy_async] + S[memset] + S[device_sync] + S[stream_sync] + S[malloc] + S[free] + S[malloc_host] + S[free_host]))
	qexpect "$p:cuda_calls-total-once" "$want" sum "$C"
	qexpect "$p:memcpy-bytes-once" $((S[htod_bytes] + S[dtoh_bytes] + S[dtod_bytes] + S[memcpy_async_bytes] + S[memset_bytes])) sum "$d/cuda_memcpy"
	qexpect "$p:gpu_alloc-once" $((S[malloc_bytes] + S[malloc_host_bytes])) sum "$d/gpu_alloc"
}

check_runtime_over_driver stub-static runtime_wl_static
check_runtime_over_driver stub-shared runtime_wl_shared
