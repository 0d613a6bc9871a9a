#!/usr/bin/env bash
# CPU shares of a workload with a known 1:2:3 split, recorded with -- and with -p, read
# back by go tool pprof: each leaf under its own parent within 5 points of its share.
source "$(dirname "$0")/lib.sh"
need_root
need_go

SPEC="leaf_a<parent_a=1,leaf_b<parent_b=2,leaf_c<parent_c=3"

# 1. gpubpf starts the command (-F 499 for enough samples in a few seconds).
out=$TMP/cmd.pb.gz
if "$GPUBPF" record -F 499 -o "$out" -- "$WL/cpu_ratio" 4 >"$TMP/cmd.log" 2>&1; then
	pass "record-command-exit0"
else
	fail "record-command-exit0" "$(tail -3 "$TMP/cmd.log")"
fi
if pprof -traces "$out" >"$TMP/cmd.traces" && [ -s "$TMP/cmd.traces" ]; then
	pass "pprof-reads-command-profile"
else
	fail "pprof-reads-command-profile" "$(head -3 "$TMP/pprof.err")"
fi
if python3 tests/e2e/shares.py "$TMP/cmd.traces" "$SPEC" 5 >"$TMP/cmd.shares"; then
	pass "shares-command"
else
	fail "shares-command" "$(tr '\n' ';' <"$TMP/cmd.shares")"
fi
cat "$TMP/cmd.shares"
grep -q "wrote $out" "$TMP/cmd.log" && pass "summary-line" || fail "summary-line" "$(cat "$TMP/cmd.log")"

# 2. Attach to a running process with -p.
"$WL/cpu_ratio" 30 >/dev/null &
wl=$!
KILL_PIDS+=("$wl")
sleep 0.3
out=$TMP/pid.pb.gz
if "$GPUBPF" record -F 499 -d 4 -p "$wl" -o "$out" >"$TMP/pid.log" 2>&1; then
	pass "record-pid-exit0"
else
	fail "record-pid-exit0" "$(tail -3 "$TMP/pid.log")"
fi
kill "$wl" 2>/dev/null
pprof -traces "$out" >"$TMP/pid.traces"
if python3 tests/e2e/shares.py "$TMP/pid.traces" "$SPEC" 5 >"$TMP/pid.shares"; then
	pass "shares-pid"
else
	fail "shares-pid" "$(tr '\n' ';' <"$TMP/pid.shares")"
fi
cat "$TMP/pid.shares"

# 3. Sample types, period and labels as the issue fixes them.
pprof -raw "$out" >"$TMP/raw" 2>&1
grep -qE '^samples/count(\[dflt\])? cpu/nanoseconds' "$TMP/raw" && pass "sample-types" || fail "sample-types" "$(head -5 "$TMP/raw")"
grep -qE 'Period: 2004008' "$TMP/raw" && pass "period" || fail "period" "$(grep -i period "$TMP/raw")"
pprof -tags "$out" >"$TMP/tags"
for l in pid tid thread_name process_name; do
	grep -q "^ *$l:" "$TMP/tags" && pass "label-$l" || fail "label-$l" "missing in pprof -tags"
done
grep -q "cpu_ratio" "$TMP/tags" && pass "process-name-value" || fail "process-name-value" "$(cat "$TMP/tags")"
# file:line from DWARF
pprof -lines -top -nodecount=5 "$out" >"$TMP/lines"
grep -qE 'leaf_c .*cpu_ratio.c:[0-9]+' "$TMP/lines" && pass "file-line" || fail "file-line" "$(cat "$TMP/lines")"

# 4. --format folded --sample-type: cpu nanoseconds per stack, the same 1:2:3 split; a
# type it does not know, or a format that keeps every type, is refused before recording.
# A sample's cpu value has the scheduler's tick for grain (4 ms here: at 499 Hz half the
# samples carry 0, DESIGN.md), so a 2 s run's shares strayed 5 points (c: 0.45-0.55 in 6
# runs, at a6958bb too); 6 s runs stay within 2.3, and a loaded host gets one rerun.
cat >"$TMP/folded.py" <<'PY'
import sys
tot = {"leaf_a": 0, "leaf_b": 0, "leaf_c": 0}
for line in open(sys.argv[1]):
    stack, n = line.rsplit(" ", 1)
    leaf = stack.split(";")[-1]
    if leaf in tot:
        tot[leaf] += int(n)
s = sum(tot.values())
# cpu/nanoseconds: 6 s of one busy thread is about 6e9 ns, far more than the ~3000 samples
ok = s > 1.5e9 and all(abs(tot[k] / s - w / 6) < 0.05 for k, w in (("leaf_a", 1), ("leaf_b", 2), ("leaf_c", 3)))
print({k: round(v / s, 3) for k, v in tot.items()}, s)
sys.exit(0 if ok else 1)
PY
for run in 1 2; do
	if ! "$GPUBPF" record -F 499 --format folded --sample-type cpu -o "$TMP/cpu.folded" -- "$WL/cpu_ratio" 6 \
		>"$TMP/folded.log" 2>&1; then
		echo "record failed: $(tail -3 "$TMP/folded.log")" >"$TMP/folded.shares"
		break
	fi
	python3 "$TMP/folded.py" "$TMP/cpu.folded" >"$TMP/folded.shares" && break
	[ $run = 1 ] && echo "# folded cpu shares off ($(cat "$TMP/folded.shares")): run again once"
done
python3 "$TMP/folded.py" "$TMP/cpu.folded" >/dev/null 2>&1 && pass "folded-cpu-ns" ||
	fail "folded-cpu-ns" "$(cat "$TMP/folded.shares")"
"$GPUBPF" record --format folded --sample-type nope -o "$TMP/x.folded" -- true >"$TMP/st.err" 2>&1 &&
	fail "sample-type-unknown" "exited 0" || {
	grep -q "unknown --sample-type 'nope'" "$TMP/st.err" && [ ! -e "$TMP/x.folded" ] &&
		pass "sample-type-unknown" || fail "sample-type-unknown" "$(cat "$TMP/st.err")"
}
"$GPUBPF" record --sample-type cpu -o "$TMP/x.pb.gz" -- true >"$TMP/st2.err" 2>&1 &&
	fail "sample-type-folded-only" "exited 0" || {
	grep -q "folded only" "$TMP/st2.err" && pass "sample-type-folded-only" ||
		fail "sample-type-folded-only" "$(cat "$TMP/st2.err")"
}
