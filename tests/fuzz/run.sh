#!/usr/bin/env bash
# Build each libFuzzer harness (tests/fuzz/fuzz_NAME.c + the parser it exercises) with
# ASan+UBSan and run it for a bounded number of inputs from a small seed corpus.
# Prints "PASS fuzz:NAME" or "FAIL fuzz:NAME: reason" per harness.
#   tests/fuzz/run.sh [RUNS]     (default 200000; FUZZ_RUNS also works)
set -u
cd "$(dirname "$0")/../.."
RUNS=${1:-${FUZZ_RUNS:-200000}}
CLANG=${CLANG:-clang}
BUILD=${BUILD:-build}
out=$BUILD/fuzz
mkdir -p "$out"
rc=0

# harness -> the userspace sources it links
declare -A SRCS=(
	[procmaps]="userspace/sym/procmaps.c"
	[perfmap]="userspace/sym/perfmap.c"
	[kallsyms]="userspace/sym/kallsyms.c userspace/lib/readfile.c"
	[demangle]="userspace/sym/demangle.c"
	[pbscan]="userspace/out/pbscan.c -lz"
	[ttyesc]="userspace/lib/ttyesc.c"
	[pylines]="userspace/trace/python_lines.c userspace/trace/python_util.c"
	[dlstate]="userspace/trace/dlstate.c userspace/sym/procmaps.c userspace/sym/elfread.c userspace/sym/elfsym.c userspace/lib/hmap.c -lelf"
	[elfsym]="userspace/sym/elfsym.c userspace/sym/elfread.c -lelf"
	[symobj]="userspace/sym/syms.c userspace/sym/syms_obj.c userspace/sym/elfsym.c userspace/sym/elfread.c userspace/sym/syms_dwarf.c userspace/sym/syms_proc.c
		userspace/sym/procmaps.c userspace/sym/procroot.c userspace/sym/perfmap.c userspace/sym/demangle.c
		userspace/sym/kallsyms.c userspace/lib/hmap.c userspace/lib/readfile.c userspace/lib/mapsnap.c
		userspace/lib/vec.c userspace/lib/log.c -ldw -lelf -lz -lbpf"
)
# inputs longer than 4096 bytes where a seed needs them (an object with DWARF)
declare -A MAXLEN=([symobj]=8192)

seed() { # name dir
	case $1 in
	procmaps)
		printf '55d0c2a00000-55d0c2a21000 r-xp 00002000 08:01 1234567      /usr/bin/cat\n' >"$2/a"
		printf '7f0000000000-7f0000001000 r-xp 00000000 fd:02 99 /tmp/lib foo.so (deleted)\n7ffd1a9f1000-7ffd1a9f3000 r-xp 00000000 00:00 0    [vdso]\n' >"$2/b"
		printf '7f0000000000-7f0000010000 rw-p 00000000 00:00 0\n' >"$2/c"
		;;
	perfmap)
		printf '7f1234000 40 foo\n0x10 0x20 Interpreted: a b c \r\n' >"$2/a"
		;;
	kallsyms)
		printf 'ffffffff81000000 T _stext\n0000000000001000 t alpha\n0000000000005000 t mod_fn\t[nvidia]\n' >"$2/a"
		;;
	pbscan)
		printf '\x0a\x04\x08\x01\x10\x02\x32\x03abc\x48\x96\x01' >"$2/a"
		printf '\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xe3\x62\x64\x02\x00\x9c\x23\x6a\x6c\x03\x00\x00\x00' >"$2/b"
		;;
	ttyesc)
		printf 'fn\x1b]0;t\x07 h\xc3\xa9 \xc2\x9b\xe2\x9c\x93\xf0\x9d\x84\x9e\xff' >"$2/a"
		;;
	pylines)
		# by the first byte: a 3.11 location table, a 3.10 line table (each after a
		# first line and an instruction index), debug offsets, a stack to merge
		printf '\x00\x05\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x00\x00\x00\x00\xf0\x03\xd8\x02\xb8\x04\x05' >"$2/a"
		printf '\x01\x0a\x00\x00\x00\x00\x00\x00\x00\x04\x00\x00\x00\x00\x00\x00\x00\x06\x01\x08\x02\x04\x80' >"$2/b"
		printf '\x02xdebugpy\x00\x00\x0d\x03' >"$2/c"
		printf '\x03\x41\x08\x03\x00\x02\x01\x01\x02\x00\x01\x00\x01' >"$2/d"
		;;
	dlstate)
		printf '7f0000000000-7f0000001000 r--p 00000000 08:01 1234       /lib64/ld-linux-x86-64.so.2\n' >"$2/a"
		printf '55d0c2a00000-55d0c2a21000 r-xp 00002000 08:01 1234 /x\nfffffffffffff000-ffffffffffffffff r--p 00000000 08:01 1234 /ld\n' >"$2/b"
		;;
	elfsym)
		# a small shared object with its functions in .gnu.hash, and a stripped copy
		printf 'void cudaLaunchKernel(void){}\nvoid cudaMalloc(void){}\nint cudaData = 3;\nvoid _dl_debug_state(void){}\n' >"$2/s.c"
		cc -shared -fPIC -nostdlib -Os -Wl,--hash-style=gnu -Wl,--build-id=none -Wl,-z,max-page-size=0x10 \
			-Wl,-z,noseparate-code -Wl,-z,norelro "$2/s.c" -o "$2/a" && strip -o "$2/b" "$2/a"
		rm -f "$2/s.c"
		;;
	symobj)
		# a small shared object with DWARF (an inlined call) and a stripped copy
		printf 'static int inl(int x){return x*3;}\n__attribute__((noinline)) int g(int x){return inl(x)+1;}\nint cudaLaunchKernel(int y){return g(y)+2;}\n' >"$2/s.c"
		cc -g -O2 -shared -fPIC -nostdlib -Wl,--hash-style=gnu -Wl,-z,max-page-size=0x10 -Wl,-z,noseparate-code \
			-Wl,-z,norelro "$2/s.c" -o "$2/a" && strip -o "$2/b" "$2/a"
		rm -f "$2/s.c"
		;;
	demangle)
		printf 'void (anonymous namespace)::f<int>(int)' >"$2/a"
		printf 'std::vector<int, std::allocator<int> >::size() const' >"$2/b"
		printf 'bool operator< <int>(int, int)' >"$2/c"
		;;
	esac
}

if ! command -v "$CLANG" >/dev/null 2>&1; then
	for name in "${!SRCS[@]}"; do
		echo "SKIP fuzz:$name: $CLANG not installed"
	done
	exit 0
fi

INC="-Iuserspace/lib -Iuserspace/sym -Iuserspace/model -Iuserspace/out -Iuserspace/trace"
for name in procmaps perfmap kallsyms demangle pbscan ttyesc pylines dlstate elfsym symobj; do
	bin=$out/fuzz_$name
	log=$out/fuzz_$name.log
	if ! "$CLANG" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all $INC \
		"tests/fuzz/fuzz_$name.c" ${SRCS[$name]} -o "$bin" >"$log" 2>&1; then
		echo "FAIL fuzz:$name: build failed ($(grep -m1 -E 'error' "$log" || tail -n1 "$log"))"
		rc=1
		continue
	fi
	corpus=$(mktemp -d "${TMPDIR:-/tmp}/gpubpf-fuzz-$name.XXXXXX")
	seed "$name" "$corpus"
	if timeout 300 "$bin" -runs="$RUNS" -max_total_time="${FUZZ_MAX_SECONDS:-60}" -max_len="${MAXLEN[$name]:-4096}" -timeout=10 -rss_limit_mb=2048 \
		-artifact_prefix="$out/crash-$name-" "$corpus" >>"$log" 2>&1; then
		echo "PASS fuzz:$name"
	else
		why=$(grep -m1 -E 'ERROR: |runtime error|deadly signal|Timeout|out-of-memory' "$log")
		echo "FAIL fuzz:$name: ${why:-exit status $?} (log: $log)"
		rc=1
	fi
	rm -rf "$corpus"
done
exit $rc
