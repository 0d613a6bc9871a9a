#!/usr/bin/env bash
# CUDA runtime API tracing, end to end: runtime_wl built with static cudart (nvcc's
# default) and with shared libcudart.so.13, recorded with `gpubpf record -- ...` and
# read back with go tool pprof. Every expected number comes from the workload's own
# summary line (tests/workloads/cuda/runtime_wl.cu states its call sites):
#   launches per kernel and call site, total launches, bytes per copy direction and
#   call site, memset bytes, sync calls, gpu_alloc and gpu_inuse bytes, the
#   cuda_stream label on the work queued on the non-default stream, calling functions
#   on every stack (up to main, no frame twice), labels, and `pprof -top`.
# No GPU is needed: without a driver every call fails at once, but uprobes fire.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/cuda_lib.sh"
need_root
need_go
need_cuda runtime_wl_static runtime_wl_shared

# The stream runtime_wl uses for launch_c and do_async: its fake handle, stated in
# runtime_wl.cu ("s with 0x5000"), which the failing cudaStreamCreate leaves as is.
WL_STREAM=0x5000

# check_runtime PREFIX BINARY REPEAT
check_runtime() {
	local p=$1 bin=$2 r=$3 out=$TMP/$1.pb.gz d=$TMP/$1 log=$TMP/$1.log got want
	if GPUBPF_WL_REPEAT=$r "$GPUBPF" record -o "$out" -- "$CUDA_WL/$bin" >"$log" 2>&1; then
		pass "$p:record-exit0"
	else
		fail "$p:record-exit0" "$(tail -3 "$log" | tr '\n' ';')"
	fi
	if ! wl_summary "$log" runtime_wl; then
		fail "$p:summary" "no 'runtime_wl:' summary line from $bin: $(tail -3 "$log" | tr '\n' ';')"
		return
	fi
	expect "$p:summary-repeat" "${S[repeat]}" "$r"
	if ! load_profile "$out" "$d"; then
		fail "$p:pprof-reads-profile" "$(head -3 "$TMP/pprof.err" | tr '\n' ';')"
		return
	fi
	pass "$p:pprof-reads-profile"
	local info
	info=$(cuda_comment "$d")
	echo "$p: $info"
	grep -q 'samples/count cpu/nanoseconds cuda_calls/count cuda_launches/count cuda_memcpy/bytes cuda_sync_wait/nanoseconds gpu_alloc/bytes gpu_inuse/bytes' "$d/raw" &&
		pass "$p:sample-types" || fail "$p:sample-types" "$(grep -m1 'samples/count' "$d/raw")"

	# --- launches: per kernel and call site, total, all through cudaLaunchKernel
	got=$($CHECK sum "$d/cuda_launches" --leaf 'saxpy_kernel<float>' --api cudaLaunchKernel --under launch_a --under main)
	expect "$p:launches-saxpy_float-from-launch_a" "$got" "${S[launch_a]}" "$(stacks_of "$d" cuda_launches --leaf 'saxpy_kernel<float>')"
	got=$($CHECK sum "$d/cuda_launches" --leaf 'saxpy_kernel<double>' --api cudaLaunchKernel --under launch_b --under main)
	expect "$p:launches-saxpy_double-from-launch_b" "$got" "${S[launch_b]}" "$(stacks_of "$d" cuda_launches --leaf 'saxpy_kernel<double>')"
	got=$($CHECK sum "$d/cuda_launches" --leaf 'gpubpf_demo::scale_kernel' --api cudaLaunchKernel --under launch_c --under main)
	expect "$p:launches-scale_kernel-from-launch_c" "$got" "${S[launch_c]}" "$(stacks_of "$d" cuda_launches --leaf 'gpubpf_demo::scale_kernel')"
	got=$($CHECK sum "$d/cuda_launches")
	expect "$p:launches-total" "$got" "${S[launch]}" "$info"
	got=$($CHECK sum "$d/cuda_calls" --api cudaLaunchKernel)
	expect "$p:launch-calls-cudaLaunchKernel-once-each" "$got" "${S[launch]}" "cuda_calls under cudaLaunchKernel"
	got=$($CHECK count "$d/cuda_launches" --not-under launch_a --not-under launch_b --not-under launch_c)
	expect "$p:launches-no-stray-stacks" "$got" 0 "$(stacks_of "$d" cuda_launches --not-under launch_a --not-under launch_b --not-under launch_c)"

	# --- cuda_stream label: on the non-default stream only
	got=$($CHECK sum "$d/cuda_launches" --leaf 'gpubpf_demo::scale_kernel' --label cuda_stream=$WL_STREAM)
	expect "$p:stream-label-launch_c" "$got" "${S[launch_c]}" "labels: $($CHECK labels "$d/cuda_launches" --key cuda_stream)"
	got=$($CHECK sum "$d/cuda_launches" --leaf 'saxpy_kernel*' --nolabel cuda_stream)
	expect "$p:no-stream-label-default-stream-launches" "$got" $((S[launch_a] + S[launch_b]))
	got=$($CHECK sum "$d/cuda_memcpy" --api cudaMemcpyAsync --label cuda_stream=$WL_STREAM)
	expect "$p:stream-label-async-copy" "$got" "${S[memcpy_async_bytes]}" "$(stacks_of "$d" cuda_memcpy --api cudaMemcpyAsync)"
	got=$($CHECK sum "$d/cuda_memcpy" --api cudaMemcpy --nolabel cuda_stream)
	expect "$p:no-stream-label-sync-copies" "$got" $((S[htod_bytes] + S[dtoh_bytes] + S[dtod_bytes]))

	# --- copies: bytes per direction and call site, and call counts
	got=$($CHECK sum "$d/cuda_memcpy" --leaf '[memcpy HtoD]' --api cudaMemcpy --caller do_htod --under main)
	expect "$p:memcpy-htod-bytes" "$got" "${S[htod_bytes]}" "$(stacks_of "$d" cuda_memcpy --leaf '[memcpy HtoD]')"
	got=$($CHECK sum "$d/cuda_memcpy" --leaf '[memcpy DtoH]' --api cudaMemcpy --caller do_dtoh --under main)
	expect "$p:memcpy-dtoh-bytes" "$got" "${S[dtoh_bytes]}" "$(stacks_of "$d" cuda_memcpy --leaf '[memcpy DtoH]')"
	got=$($CHECK sum "$d/cuda_memcpy" --leaf '[memcpy DtoD]' --api cudaMemcpy --caller do_dtod --under main)
	expect "$p:memcpy-dtod-bytes" "$got" "${S[dtod_bytes]}" "$(stacks_of "$d" cuda_memcpy --leaf '[memcpy DtoD]')"
	got=$($CHECK sum "$d/cuda_memcpy" --leaf '[memcpy HtoD]' --api cudaMemcpyAsync --caller do_async --under main)
	expect "$p:memcpy-async-htod-bytes" "$got" "${S[memcpy_async_bytes]}" "$(stacks_of "$d" cuda_memcpy --api cudaMemcpyAsync)"
	got=$($CHECK sum "$d/cuda_memcpy" --leaf '[memset]' --api cudaMemset --caller do_memset --under main)
	expect "$p:memset-bytes" "$got" "${S[memset_bytes]}" "$(stacks_of "$d" cuda_memcpy --leaf '[memset]')"
	got=$($CHECK sum "$d/cuda_memcpy")
	want=$((S[htod_bytes] + S[dtoh_bytes] + S[dtod_bytes] + S[memcpy_async_bytes] + S[memset_bytes]))
	expect "$p:memcpy-total-bytes" "$got" "$want"
	expect "$p:memcpy-calls" "$($CHECK sum "$d/cuda_calls" --api cudaMemcpy)" "${S[memcpy]}"
	expect "$p:memcpy-async-calls" "$($CHECK sum "$d/cuda_calls" --api cudaMemcpyAsync)" "${S[memcpy_async]}"
	expect "$p:memset-calls" "$($CHECK sum "$d/cuda_calls" --api cudaMemset)" "${S[memset]}"

	# --- syncs: the API function is the leaf, the caller under it
	got=$($CHECK sum "$d/cuda_calls" --leaf cudaDeviceSynchronize --caller do_syncs --api cudaDeviceSynchronize)
	expect "$p:device-sync-calls" "$got" "${S[device_sync]}" "$(stacks_of "$d" cuda_calls --api cudaDeviceSynchronize)"
	got=$($CHECK sum "$d/cuda_calls" --leaf cudaStreamSynchronize --caller do_syncs --api cudaStreamSynchronize)
	expect "$p:stream-sync-calls" "$got" "${S[stream_sync]}" "$(stacks_of "$d" cuda_calls --api cudaStreamSynchronize)"
	got=$($CHECK count "$d/cuda_sync_wait" --api cudaDeviceSynchronize)
	expect_ge "$p:sync-wait-time-recorded" "$got" 1 "stacks with cuda_sync_wait > 0 under cudaDeviceSynchronize"

	# --- allocations: gpu_alloc = everything allocated, gpu_inuse = not freed by the end
	got=$($CHECK sum "$d/gpu_alloc" --leaf cudaMalloc --caller do_allocs --under main)
	expect "$p:gpu_alloc-cudaMalloc-bytes" "$got" "${S[malloc_bytes]}" "$(stacks_of "$d" gpu_alloc --leaf cudaMalloc)"
	expect "$p:cudaMalloc-calls" "$($CHECK sum "$d/cuda_calls" --api cudaMalloc)" "${S[malloc]}"
	expect "$p:cudaFree-calls" "$($CHECK sum "$d/cuda_calls" --api cudaFree --caller do_frees)" "${S[free]}"
	got=$($CHECK sum "$d/gpu_inuse")
	expect "$p:gpu_inuse-total-bytes" "$got" "${S[inuse_bytes]}" "$(stacks_of "$d" gpu_inuse)"
	got=$($CHECK sum "$d/gpu_inuse" --leaf cudaMalloc --caller do_allocs)
	expect "$p:gpu_inuse-under-allocating-stack" "$got" "${S[inuse_bytes]}"
	expect "$p:gpu_inuse-consistent" "${S[inuse_bytes]}" $((S[malloc_bytes] - S[free_bytes])) "summary line itself"
	got=$($CHECK sum "$d/gpu_alloc" --leaf cudaMallocHost --caller do_pinned_alloc)
	expect "$p:gpu_alloc-cudaMallocHost-bytes" "$got" "${S[malloc_host_bytes]}" "$(stacks_of "$d" gpu_alloc --leaf cudaMallocHost)"
	got=$($CHECK sum "$d/gpu_inuse" --leaf cudaMallocHost)
	expect "$p:gpu_inuse-freed-pinned-is-zero" "$got" 0 "cudaFreeHost'd pinned buffer still in use"
	expect "$p:cudaFreeHost-calls" "$($CHECK sum "$d/cuda_calls" --api cudaFreeHost --caller do_pinned_free)" "${S[free_host]}"

	# --- every call accounted for, stacks whole
	want=$((S[launch] + S[memcpy] + S[memcpy_async] + S[memset] + S[device_sync] + S[stream_sync] + S[malloc] + S[free] + S[malloc_host] + S[free_host]))
	got=$($CHECK sum "$d/cuda_calls")
	expect "$p:cuda_calls-total" "$got" "$want" "$info"
	got=$(sed -n 's/.*exact counts; \([0-9]*\) calls traced.*/\1/p' <<<"$info")
	expect "$p:comment-calls-traced-matches" "$got" "$want" "$info"
	got=$($CHECK sum "$d/cuda_calls" --under main)
	expect "$p:stacks-reach-main" "$got" "$want" "cuda_calls whose stack has main; $info"
	if $CHECK dups "$d/cuda_calls" >"$TMP/$p.dups"; then
		pass "$p:no-duplicated-frames"
	else
		fail "$p:no-duplicated-frames" "$(wc -l <"$TMP/$p.dups") CUDA stacks repeat a frame, e.g. $(head -2 "$TMP/$p.dups" | tr '\n' ';')"
	fi

	# --- labels on the CUDA samples
	local pname=${bin:0:15} pids tids
	got=$($CHECK labels "$d/cuda_calls" --key process_name)
	expect "$p:label-process_name" "$got" "$pname"
	pids=$($CHECK labels "$d/cuda_calls" --key pid)
	tids=$($CHECK labels "$d/cuda_calls" --key tid)
	if [ -n "$pids" ] && [ "$pids" = "$tids" ] && [ "$(wc -w <<<"$pids")" = 1 ]; then
		pass "$p:label-pid-tid"
	else
		fail "$p:label-pid-tid" "single-threaded workload: want one pid == tid, got pid '$pids' tid '$tids'"
	fi
	got=$($CHECK labels "$d/cuda_calls" --key thread_name)
	expect "$p:label-thread_name" "$got" "$pname"

	# --- what a user types
	pprof -top -sample_index=cuda_launches "$out" >"$TMP/$p.top"
	local k
	for k in 'saxpy_kernel<float>(' 'saxpy_kernel<double>(' 'gpubpf_demo::scale_kernel('; do
		grep -qF "$k" "$TMP/$p.top" && pass "$p:top-lists-${k%%(*}" || fail "$p:top-lists-${k%%(*}" "not in pprof -top -sample_index=cuda_launches: $(head -15 "$TMP/$p.top" | tail -5 | tr '\n' ';')"
	done
}

check_runtime static-r1 runtime_wl_static 1
check_runtime shared-r1 runtime_wl_shared 1
check_runtime static-r7 runtime_wl_static 7
check_runtime shared-r4 runtime_wl_shared 4
