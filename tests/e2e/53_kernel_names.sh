#!/usr/bin/env bash
# Kernel names where the launch handle is no symbol of the process: on a real driver the
# handles a launch passes are heap pointers (a cudaKernel_t from __cudaGetKernel under lazy
# loading, a CUfunction), and on an H100 that left every launch of runtime_wl and 4,000 of
# 6,400 launches of a PyTorch loop named [cuda kernel 0x...]. Here heap_handles launches
# through a malloc'd handle, as a real driver hands them out, and each way of naming it
# must work: nvcc's __device_stub__ frame on the stack; CUPTI's symbolName and params
# (the injection library's synthetic CUPTI; PyTorch's stubs are inlined); a driver name of
# 278 mangled bytes, complete and demangled (2,049 bytes).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/cuda_lib.sh"
need_root
need_go
HH=$WL/inject/heap_handles
if [ "${HAVE_CUDA:-}" != 1 ] || [ ! -x "$HH" ]; then
	skip all "no CUDA, or $HH missing (make tools): kernel naming tests NOT RUN"
	exit 0
fi

# named KIND WANT: every launch of the recording is named WANT (not one unnamed).
named() {
	local kind=$1 want=$2 out=$TMP/$1.pb.gz log=$TMP/$1.log total got unnamed
	shift 2
	if ! GPUBPF_INJECT_MAX_RATE=0 "$GPUBPF" record --exact -o "$out" -- "$HH" "$@" >"$log" 2>&1 ||
		! wl_summary "$log" heap_handles; then
		fail "$kind" "$(tail -3 "$log" | tr '\n' ';')"
		return
	fi
	pprof -sample_index=cuda_launches -raw "$out" >"$TMP/$kind.raw"
	total=$(pprof -sample_index=cuda_launches -top "$out" | sed -n 's/.*Total samples = \([0-9]*\).*/\1/p')
	got=$(pprof -sample_index=cuda_launches -top -nodecount=1000 "$out" | awk -v w="$want" 'index($0, w) { print $1; exit }')
	unnamed=$(grep -c '\[cuda kernel 0x' "$TMP/$kind.raw")
	if [ "$total" = "${S[launches]}" ] && [ "${got:-0}" = "${S[launches]}" ] && [ "$unnamed" = 0 ]; then
		pass "$kind"
	else
		fail "$kind" "total ${total:-?}, '$want' ${got:-0}, unnamed frames $unnamed (handle ${S[handle]})"
	fi
}

# Default mode: device time runs in windows, and between them the library's callbacks
# stay on until gpubpf has drained launches all named; the launches come 1.5 s after the
# session attached (the cost measured, the windows running). Counts are estimates there:
# only the names are checked.
out=$TMP/default.pb.gz
if GPUBPF_WINDOW_PERIOD=0.1 "$GPUBPF" record -o "$out" -- "$HH" cupti 2000 1500 >"$TMP/default.log" 2>&1 &&
	wl_summary "$TMP/default.log" heap_handles; then
	pprof -sample_index=cuda_launches -raw "$out" >"$TMP/default.raw"
	got=$(pprof -sample_index=cuda_launches -top -nodecount=1000 "$out" | awk 'index($0, "cupti_kernel()") { print $1; exit }')
	unnamed=$(grep -c '\[cuda kernel 0x' "$TMP/default.raw")
	if [ "${got:-0}" -gt 0 ] && [ "$unnamed" = 0 ]; then
		pass "cupti-symbol-default-mode"
	else
		fail "cupti-symbol-default-mode" "'cupti_kernel()' ${got:-0}, unnamed frames $unnamed"
	fi
else
	fail "cupti-symbol-default-mode" "$(tail -3 "$TMP/default.log" | tr '\n' ';')"
fi

named stub-frame "heap_kernel(float*, int)" stub 25
named cupti-symbol "cupti_kernel()" cupti 25
named driver-long-name "at::native::vectorized_elementwise_kernel<4, at::native::Functor<std::tuple<float, double, std::map<" \
	driver 25 "$CUDA_WL/stubs/libcuda.so.1"
# the whole name: 2,049 bytes demangled, ending in its last parameter's type
len=$(grep -o 'void at::native::vectorized_elementwise_kernel<[^]]*' "$TMP/driver-long-name.raw" | head -1 | awk '{ print length($0) }')
if grep -qF 'std::tuple<float, float, std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > > >, 2ul>)' "$TMP/driver-long-name.raw"; then
	pass "driver-long-name:complete"
else
	fail "driver-long-name:complete" "name cut at ${len:-0} bytes"
fi
