#!/usr/bin/env bash
# gpubpf report, convert and --format speedscope on real recordings, golden-free: the
# numbers in the report's tables are checked against the workload's own summary line
# (runtime_wl_shared, recorded with --exact) and against the known 1:2:3 CPU split of
# cpu_ratio; every table's percentages add up to 100; converted files carry the same
# totals; bad input fails with a message and a non-zero status.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/cuda_lib.sh"
need_root

# parse_report FILE: the report's tables as JSON {section title: {row name: [numbers]}},
# "-" as null, "12.5%" as 12.5; the section title is its line up to " (" or ":".
parse_report() {
	python3 - "$1" <<'EOF'
import json, re, sys
secs, cur = {}, None
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if not line:
        cur = None
        continue
    if not line.startswith(" "):
        title = re.split(r" \(|:", line)[0]
        cur = secs.setdefault(title, {})
        continue
    if cur is None or "  " not in line.strip():
        continue
    nums, name = line.strip().rsplit("  ", 1) if line.strip().count("  ") else (line, "")
    # the name is after the last double space; numbers before it
    idx = line.rfind("  ")
    nums, name = line[:idx].split(), line[idx + 2:]
    try:
        vals = [None if t == "-" else float(t.rstrip("%")) for t in nums]
    except ValueError:
        continue  # the header line, or a note
    cur[name] = vals
json.dump(secs, sys.stdout)
EOF
}

# q FILE EXPR: evaluate a Python expression over the parsed report R; prints the result.
q() { python3 -c "import json,sys; R=json.load(open(sys.argv[1])); print($2)" "$1"; }

# pct_ok FILE SECTION COL: the percentages in column COL add up to 100 (within rounding).
pct_ok() {
	python3 -c "
import json,sys
R=json.load(open(sys.argv[1])); rows=R[sys.argv[2]].values()
s=sum(r[int(sys.argv[3])] or 0 for r in rows)
sys.exit(0 if abs(s-100) <= 0.05*len(rows)+0.01 else print(sys.argv[2], 'sums to', s) or 1)" "$1" "$2" "$3"
}

eq() { # NAME GOT WANT
	if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "got '$2', want '$3'"; fi
}

# --- 1. CUDA: runtime_wl_shared, exact counts -------------------------------------------
if [ "${HAVE_CUDA:-}" = 1 ] && [ -x "$CUDA_WL/runtime_wl_shared" ]; then
	out=$TMP/rt.pb.gz
	if "$GPUBPF" record --exact -o "$out" -- "$CUDA_WL/runtime_wl_shared" >"$TMP/rt.log" 2>&1; then
		pass "cuda:record"
	else
		fail "cuda:record" "$(tail -3 "$TMP/rt.log" | tr '\n' ';')"
	fi
	wl_summary "$TMP/rt.log" runtime_wl || fail "cuda:summary" "no runtime_wl summary line"
	if "$GPUBPF" report --raw --top 0 "$out" >"$TMP/rt.report" 2>"$TMP/rt.err"; then
		pass "cuda:report-exit0"
	else
		fail "cuda:report-exit0" "$(cat "$TMP/rt.err")"
	fi
	cat "$TMP/rt.report"
	parse_report "$TMP/rt.report" >"$TMP/rt.json"
	R=$TMP/rt.json
	A="R['CUDA API summary']"
	eq "cuda:api-launch" "$(q "$R" "int($A['cudaLaunchKernel'][0])")" "${S[launch]}"
	eq "cuda:api-memcpy" "$(q "$R" "int($A['cudaMemcpy'][0])")" "${S[memcpy]}"
	eq "cuda:api-memcpy-async" "$(q "$R" "int($A['cudaMemcpyAsync'][0])")" "${S[memcpy_async]}"
	eq "cuda:api-memset" "$(q "$R" "int($A['cudaMemset'][0])")" "${S[memset]}"
	eq "cuda:api-malloc" "$(q "$R" "int($A['cudaMalloc'][0])")" "${S[malloc]}"
	eq "cuda:api-free" "$(q "$R" "int($A['cudaFree'][0])")" "${S[free]}"
	eq "cuda:api-device-sync" "$(q "$R" "int($A['cudaDeviceSynchronize'][0])")" "${S[device_sync]}"
	eq "cuda:api-stream-sync" "$(q "$R" "int($A['cudaStreamSynchronize'][0])")" "${S[stream_sync]}"
	eq "cuda:api-sync-waits" "$(q "$R" "$A['cudaDeviceSynchronize'][2] > 0 and $A['cudaMalloc'][2] == 0")" True
	want=$((S[launch] + S[memcpy] + S[memcpy_async] + S[memset] + S[malloc] + S[free] + S[device_sync] + \
		S[stream_sync] + S[malloc_host] + S[free_host]))
	eq "cuda:api-total" "$(q "$R" "int(sum(r[0] for r in $A.values()))")" "$want"
	check "cuda:api-pct-100" pct_ok "$R" "CUDA API summary" 1
	check "cuda:api-wait-pct-100" pct_ok "$R" "CUDA API summary" 3

	K="R['GPU kernel summary']"
	grep -q "no device time" "$TMP/rt.report" && pass "cuda:no-device-time-said" ||
		fail "cuda:no-device-time-said" "no line saying why there is no device time"
	eq "cuda:kernel-float" "$(q "$R" "int($K['saxpy_kernel<float>(int, float, float const*, float*)'][0])")" "${S[launch_a]}"
	eq "cuda:kernel-double" "$(q "$R" "int($K['saxpy_kernel<double>(int, double, double const*, double*)'][0])")" "${S[launch_b]}"
	eq "cuda:kernel-scale" "$(q "$R" "int($K['gpubpf_demo::scale_kernel(float*, int)'][0])")" "${S[launch_c]}"
	check "cuda:kernel-pct-100" pct_ok "$R" "GPU kernel summary" 1

	M="R['Memory operations']"
	eq "cuda:memcpy-dtoh" "$(q "$R" "int($M['[memcpy DtoH]'][1])")" "${S[dtoh_bytes]}"
	eq "cuda:memcpy-dtod" "$(q "$R" "int($M['[memcpy DtoD]'][1])")" "${S[dtod_bytes]}"
	eq "cuda:memset-bytes" "$(q "$R" "int($M['[memset]'][1])")" "${S[memset_bytes]}"
	eq "cuda:memset-calls" "$(q "$R" "int($M['[memset]'][0])")" "${S[memset]}"
	eq "cuda:memops-bytes" "$(q "$R" "int(sum(r[1] for r in $M.values()))")" \
		"$((S[htod_bytes] + S[dtoh_bytes] + S[dtod_bytes] + S[memcpy_async_bytes] + S[memset_bytes]))"
	eq "cuda:memops-calls" "$(q "$R" "int(sum(r[0] for r in $M.values()))")" \
		"$((S[memcpy] + S[memcpy_async] + S[memset]))"
	check "cuda:memops-pct-100" pct_ok "$R" "Memory operations" 2

	G="R['GPU memory by allocating call site']"
	eq "cuda:gpumem-alloc" "$(q "$R" "int(sum(r[0] for r in $G.values()))")" "$((S[malloc_bytes] + S[malloc_host_bytes]))"
	eq "cuda:gpumem-inuse" "$(q "$R" "int(sum(r[2] for r in $G.values()))")" "${S[inuse_bytes]}"
	eq "cuda:gpumem-sites-in-do_allocs" "$(q "$R" "sum(1 for n in $G if n.startswith('do_allocs(') and 'runtime_wl.cu:' in n)")" "${S[malloc]}"
	check "cuda:gpumem-pct-100" pct_ok "$R" "GPU memory by allocating call site" 1

	C="R['Top launch call sites']"
	for f in a b c; do
		eq "cuda:site-launch_$f" "$(q "$R" "int(sum(r[0] for n, r in $C.items() if n.startswith('launch_$f(') and 'runtime_wl.cu:' in n))")" "${S[launch_$f]}"
	done
	check "cuda:sites-pct-100" pct_ok "$R" "Top launch call sites" 1

	# human units and --top: the same run, readable
	"$GPUBPF" report --top 3 "$out" >"$TMP/rt.human" 2>&1
	grep -qE '^ +[0-9]+ +[0-9.]+ (MiB|KiB) .*\[memcpy HtoD\]' "$TMP/rt.human" && pass "cuda:human-units" ||
		fail "cuda:human-units" "$(grep -A6 'Memory operations' "$TMP/rt.human" | tr '\n' ';')"
	grep -qE '^ .*\[[0-9]+ more\]$' "$TMP/rt.human" && pass "cuda:top-more-row" || fail "cuda:top-more-row" "no [N more] row with --top 3"

	# --- convert: speedscope, folded and pprof carry the same totals ---
	if "$GPUBPF" convert "$out" -o "$TMP/rt.speedscope.json" 2>"$TMP/conv.err"; then
		pass "convert:speedscope-exit0"
	else
		fail "convert:speedscope-exit0" "$(cat "$TMP/conv.err")"
	fi
	got=$(python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
assert d['\$schema']=='https://www.speedscope.app/file-format-schema.json'
p={x['name']:x for x in d['profiles']}
fr=d['shared']['frames']
for x in d['profiles']:
    assert x['type']=='sampled' and len(x['samples'])==len(x['weights'])
    assert all(0<=i<len(fr) for s in x['samples'] for i in s)
names={f['name'] for f in fr}
assert any(f.get('file','').endswith('runtime_wl.cu') and f.get('line',0)>0 for f in fr)
print(int(sum(p['cuda_launches']['weights'])), p['cuda_launches']['unit'], p['cuda_memcpy']['unit'],
      p['cuda_sync_wait']['unit'], 'saxpy_kernel<float>(int, float, float const*, float*)' in names)
" "$TMP/rt.speedscope.json" 2>&1)
	eq "convert:speedscope-content" "$got" "${S[launch]} none bytes nanoseconds True"
	"$GPUBPF" convert "$out" -o "$TMP/rt.folded" --sample-type cuda_launches 2>"$TMP/conv.err"
	eq "convert:folded-launches" "$(awk '{s+=$NF} END {print s}' "$TMP/rt.folded")" "${S[launch]}"
	grep -q ';launch_a(int, float\*, float\*);.*;cudaLaunchKernel;saxpy_kernel<float>' "$TMP/rt.folded" &&
		pass "convert:folded-stack" || fail "convert:folded-stack" "$(head -3 "$TMP/rt.folded")"
	"$GPUBPF" convert "$out" -o "$TMP/rt2.pb.gz" 2>"$TMP/conv.err"
	"$GPUBPF" report --raw --top 0 "$TMP/rt2.pb.gz" >"$TMP/rt2.report" 2>&1
	if diff <(tail -n +2 "$TMP/rt.report") <(tail -n +2 "$TMP/rt2.report") >"$TMP/rt.diff"; then
		pass "convert:pprof-same-report"
	else
		fail "convert:pprof-same-report" "$(head -5 "$TMP/rt.diff" | tr '\n' ';')"
	fi
	if command -v go >/dev/null; then
		pprof -raw "$TMP/rt2.pb.gz" >/dev/null && pass "convert:pprof-reads-it" ||
			fail "convert:pprof-reads-it" "$(head -3 "$TMP/pprof.err")"
	fi

	# --- record --format speedscope ---
	if "$GPUBPF" record --exact --format speedscope -o "$TMP/direct.json" -- "$CUDA_WL/runtime_wl_shared" \
		>"$TMP/direct.log" 2>&1; then
		pass "record-speedscope-exit0"
	else
		fail "record-speedscope-exit0" "$(tail -3 "$TMP/direct.log" | tr '\n' ';')"
	fi
	got=$(python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
print(int(sum(next(p for p in d['profiles'] if p['name']=='cuda_launches')['weights'])))" "$TMP/direct.json" 2>&1)
	eq "record-speedscope-launches" "$got" "${S[launch]}"
else
	skip "cuda" "HAVE_CUDA=${HAVE_CUDA:-} or $CUDA_WL/runtime_wl_shared missing: CUDA report checks NOT RUN"
fi

# --- 2. CPU: cpu_ratio's 1:2:3 split in the top-functions table --------------------------
out=$TMP/cpu.pb.gz
if "$GPUBPF" record -F 499 -o "$out" -- "$WL/cpu_ratio" 3 >"$TMP/cpu.log" 2>&1; then
	pass "cpu:record"
else
	fail "cpu:record" "$(tail -3 "$TMP/cpu.log" | tr '\n' ';')"
fi
"$GPUBPF" report --raw --top 0 "$out" >"$TMP/cpu.report" 2>&1
sed -n '/^Top functions/,/^$/p' "$TMP/cpu.report" | head -12
parse_report "$TMP/cpu.report" >"$TMP/cpu.json"
R=$TMP/cpu.json
TF="R['Top functions by samples/count']"
got=$(q "$R" "' '.join('%s=%d' % (f, round($TF[f][1])) for f in ('leaf_a', 'leaf_b', 'leaf_c'))")
if python3 -c "
import sys
v={k: int(x) for k, x in (t.split('=') for t in sys.argv[1].split())}
sys.exit(0 if all(abs(v[k]-w) <= 5 for k, w in (('leaf_a', 100/6), ('leaf_b', 200/6), ('leaf_c', 50))) else 1)" "$got"; then
	pass "cpu:self-shares"
else
	fail "cpu:self-shares" "$got (want about 17/33/50)"
fi
# a few samples land outside main (process start and exit)
eq "cpu:cum-main-most" "$(q "$R" "$TF['main'][3] >= 97")" True
check "cpu:self-pct-100" pct_ok "$R" "Top functions by samples/count" 1
grep -q "CUDA API summary: left out: no CUDA API calls" "$TMP/cpu.report" && pass "cpu:no-cuda-said" ||
	fail "cpu:no-cuda-said" "$(grep -i 'CUDA API' "$TMP/cpu.report")"

# --- 3. a trace file: duration statistics ---------------------------------------------
cat >"$TMP/t.trace.json" <<'EOF'
{"traceEvents":[
{"ph":"X","cat":"kernel","name":"k","pid":1,"tid":1073741824,"ts":1.0,"dur":1.0},
{"ph":"X","cat":"kernel","name":"k","pid":1,"tid":1073741824,"ts":3.0,"dur":3.0},
{"ph":"X","cat":"kernel","name":"k","pid":1,"tid":1073741824,"ts":7.0,"dur":2.0},
{"ph":"X","cat":"cuda_api","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":0.5,"dur":0.25}]}
EOF
"$GPUBPF" report --raw "$TMP/t.trace.json" >"$TMP/t.report" 2>&1
parse_report "$TMP/t.report" >"$TMP/t.json"
eq "trace:kernel-stats" "$(q "$TMP/t.json" "R['GPU kernels']['k'][:6]")" "[3.0, 6000.0, 100.0, 1000.0, 2000.0, 3000.0]"
eq "trace:api-stats" "$(q "$TMP/t.json" "R['CUDA API calls']['cudaLaunchKernel'][:6]")" "[1.0, 250.0, 100.0, 250.0, 250.0, 250.0]"

# --- 4. bad input: a clear line and a non-zero status ---------------------------------
head -c 300 /dev/urandom >"$TMP/junk.pb.gz"
printf '\x1f\x8b\x08\x00garbage' >"$TMP/junk2.pb.gz"
for f in "$TMP/junk.pb.gz" "$TMP/junk2.pb.gz" "$TMP/missing.pb.gz"; do
	n=$(basename "$f")
	if "$GPUBPF" report "$f" >"$TMP/bad.out" 2>&1; then
		fail "bad-input:$n" "exited 0"
	elif grep -q "report: .*$n" "$TMP/bad.out"; then
		pass "bad-input:$n"
	else
		fail "bad-input:$n" "$(cat "$TMP/bad.out")"
	fi
done
"$GPUBPF" report --sample-type nope "$out" >"$TMP/bad.out" 2>&1 && fail "bad-sample-type" "exited 0" ||
	{ grep -q "no sample type 'nope'" "$TMP/bad.out" && pass "bad-sample-type" || fail "bad-sample-type" "$(cat "$TMP/bad.out")"; }
"$GPUBPF" convert "$out" -o "$TMP/x.unknown" >"$TMP/bad.out" 2>&1 && fail "convert-unknown-suffix" "exited 0" ||
	pass "convert-unknown-suffix"
