#!/usr/bin/env bash
# Programs we did not build (Debian's, stripped, without frame pointers): pprof's "File:"
# line names the program profiled, not the library at the leaf of the first stack.
source "$(dirname "$0")/lib.sh"
need_root
need_go

head -c 4000000 "$GPUBPF" >"$TMP/in.bin"
echo 'sum(i * i for i in range(3000000))' >"$TMP/sq.py"
py=$(readlink -f /usr/bin/python3)
for spec in "xz:xz -6 -T1 -c $TMP/in.bin" "${py##*/}:/usr/bin/python3 $TMP/sq.py"; do
	want=${spec%%:*}
	cmd=${spec#*:}
	name=$(echo "$want" | tr -c 'a-z0-9\n' '-')
	if ! command -v "${cmd%% *}" >/dev/null; then
		skip "file-line:$name" "${cmd%% *} is not installed (make deps installs it)"
		continue
	fi
	"$GPUBPF" record -F 199 -o "$TMP/$name.pb.gz" -- sh -c "exec $cmd >/dev/null" >"$TMP/$name.log" 2>&1
	got=$(pprof -top "$TMP/$name.pb.gz" | sed -n 's/^File: //p')
	if [ "$got" = "$want" ]; then pass "file-line:$name"; else fail "file-line:$name" "File: '$got' (want $want)"; fi
	"$GPUBPF" convert "$TMP/$name.pb.gz" -o "$TMP/$name.2.pb.gz" 2>/dev/null
	got=$(pprof -top "$TMP/$name.2.pb.gz" | sed -n 's/^File: //p')
	if [ "$got" = "$want" ]; then pass "file-line-after-convert:$name"; else fail "file-line-after-convert:$name" "File: '$got'"; fi
done

# gpubpf against perf on a program we did not build: how python3's samples split across
# its objects (the interpreter, its extension modules, libc, libcrypto, the kernel) agrees
# with perf's within the noise of two perf runs. Three runs one after another.
if ! command -v perf >/dev/null || ! perf record -e cpu-clock -o "$TMP/probe.data" -- true >/dev/null 2>&1; then
	skip "agrees-with-perf" "perf is missing or cannot sample here (make deps installs linux-perf)"
else
	cat >"$TMP/mix.py" <<'PY'
import hashlib, json, re, time
end = time.time() + 2.5
data = [{"k%d" % i: [i, str(i) * 3, {"x": i / 3}] for i in range(50)} for _ in range(20)]
pat = re.compile(r"(\d+)x(\d+)")
while time.time() < end:
    s = json.dumps(data)
    json.loads(s)
    pat.findall("12x34 56x78 " * 200)
    hashlib.sha256(s.encode()).hexdigest()
    sorted(range(20000), key=lambda v: -v)
PY
	perf record -e cpu-clock -F 499 -g -o "$TMP/a.data" -- /usr/bin/python3 "$TMP/mix.py" >/dev/null 2>&1
	"$GPUBPF" record --no-python -F 499 -o "$TMP/mix.pb.gz" -- /usr/bin/python3 "$TMP/mix.py" >"$TMP/mix.log" 2>&1
	perf record -e cpu-clock -F 499 -g -o "$TMP/b.data" -- /usr/bin/python3 "$TMP/mix.py" >/dev/null 2>&1
	python3 tests/e2e/dso_compare.py python3 "$TMP/a.data" "$TMP/b.data" "$TMP/mix.pb.gz" >"$TMP/cmp.txt" 2>&1
	noise=$(sed -n 's/^tv_perf_perf //p' "$TMP/cmp.txt")
	lost=$(sed -n 's/^gpubpf_stacks_lost //p' "$TMP/cmp.txt")
	# Samples whose stack was lost (stack map buckets taken by other stacks: 1-2% of
	# python's ~700 distinct stacks in 2.5 s, issue 13's note) are compared apart: at most
	# 5% of them, and the profile says how many.
	if [ -n "$lost" ] && python3 -c "import sys; sys.exit(0 if float('$lost') <= 0.05 else 1)" &&
		{ [ "$lost" = 0.0000 ] || grep -q "stacks lost" "$TMP/mix.log"; }; then
		pass "stacks-lost-few-and-said"
	else
		fail "stacks-lost-few-and-said" "lost share '${lost:-?}': $(tail -1 "$TMP/mix.log")"
	fi
	# a regression (lost kernel frames, samples in the wrong object) moves shares by
	# tens of points, in every run; two perf runs differ by one or two. One recording in
	# some 25 clean-clone runs read 0.056 (libc 8.0% against perf's 3.3%; 23 reruns
	# 0.008-0.037): a second recording tells such a one-off from a regression.
	agrees() {
		d=$(sed -n 's/^tv_gpubpf_perf //p' "$TMP/cmp.txt")
		[ -n "$d" ] && python3 -c "import sys; d, n = float('$d'), float('$noise'); sys.exit(0 if d <= max(0.05, 2 * n) else 1)"
	}
	if ! agrees; then
		echo "agrees-with-perf: first recording off ($(tr '\n' ';' <"$TMP/cmp.txt")); recording again"
		"$GPUBPF" record --no-python -F 499 -o "$TMP/mix2.pb.gz" -- /usr/bin/python3 "$TMP/mix.py" >"$TMP/mix2.log" 2>&1
		python3 tests/e2e/dso_compare.py python3 "$TMP/a.data" "$TMP/b.data" "$TMP/mix2.pb.gz" >"$TMP/cmp.txt" 2>&1
	fi
	if agrees; then
		pass "agrees-with-perf"
	else
		fail "agrees-with-perf" "$(tr '\n' ';' <"$TMP/cmp.txt")"
	fi
	cat "$TMP/cmp.txt"
fi
