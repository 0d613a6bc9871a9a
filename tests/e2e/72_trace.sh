#!/usr/bin/env bash
# --trace: a timeline of CUDA API calls as Chrome trace JSON. Checked independently of
# gpubpf's own reader (python's json): well-formed, complete events with durations,
# timestamps monotonic per thread track, process and thread names as metadata, and the
# workload's call counts; then `gpubpf report` on the file agrees.
source "$(dirname "$0")/lib.sh"
need_root
if [ "${HAVE_CUDA:-}" != 1 ] || [ ! -x "$WL/cuda/runtime_wl_shared" ]; then
	skip all "CUDA is not installed here: the timeline records CUDA calls"
	exit 0
fi
out=$TMP/run.trace.json
"$GPUBPF" record --trace -o "$out" -- "$WL/cuda/runtime_wl_shared" >"$TMP/wl.out" 2>"$TMP/rec.err"
rc=$?
[ $rc = 0 ] && pass "record-exit0" || fail "record-exit0" "$(cat "$TMP/rec.err")"
grep -q "wrote $out: a timeline of" "$TMP/rec.err" && pass "summary" || fail "summary" "$(cat "$TMP/rec.err")"
summary=$(grep '^runtime_wl:' "$TMP/wl.out")
python3 - "$out" "$summary" >"$TMP/check.out" 2>&1 <<'PY'
import json, sys
from collections import Counter, defaultdict
path, summary = sys.argv[1], sys.argv[2]
want = dict(kv.split("=") for kv in summary.split()[1:])
doc = json.load(open(path))
events = doc["traceEvents"] if isinstance(doc, dict) else doc
bad = []
calls = Counter()
last = defaultdict(float)
names = {"process_name": 0, "thread_name": 0}
for e in events:
    ph = e.get("ph")
    if ph == "M":
        names[e.get("name")] = names.get(e.get("name"), 0) + 1
        continue
    if ph != "X":
        continue
    if not isinstance(e.get("ts"), (int, float)) or not isinstance(e.get("dur"), (int, float)) or e["dur"] < 0:
        bad.append(e)
    track = (e.get("pid"), e.get("tid"))
    if e["ts"] < last[track]:
        bad.append(("not monotonic", e))
    last[track] = e["ts"]
    calls[e["name"]] += 1
checks = {
    "launches": calls["cudaLaunchKernel"] == int(want["launch"]),
    "memcpy": calls["cudaMemcpy"] == int(want["memcpy"]),
    "memcpy_async": calls["cudaMemcpyAsync"] == int(want["memcpy_async"]),
    "device_sync": calls["cudaDeviceSynchronize"] == int(want["device_sync"]),
    "malloc": calls["cudaMalloc"] == int(want["malloc"]),
    "metadata": names["process_name"] >= 1 and names["thread_name"] >= 1,
    "well-formed": not bad,
}
for k, ok in checks.items():
    print(("PASS" if ok else "FAIL"), k)
print("calls:", dict(calls), "bad:", bad[:3])
PY
while read -r verdict name; do
	case $verdict in
	PASS) pass "trace-$name" ;;
	FAIL) fail "trace-$name" "$(tail -1 "$TMP/check.out")" ;;
	esac
done < <(grep -E '^(PASS|FAIL) ' "$TMP/check.out")
grep -q '^calls:' "$TMP/check.out" || fail "trace-json" "$(cat "$TMP/check.out")"
"$GPUBPF" report "$out" >"$TMP/report.txt" 2>&1
launch=$(sed -n 's/^runtime_wl:.* launch=\([0-9]*\) .*/\1/p' "$TMP/wl.out")
if grep -qE "^ +$launch .* cudaLaunchKernel$" "$TMP/report.txt"; then
	pass "report-on-trace"
else
	fail "report-on-trace" "$(head -8 "$TMP/report.txt")"
fi
# A bound on events: the rest are counted as dropped, the file stays valid.
"$GPUBPF" record --trace --max-events 50 -o "$TMP/small.json" -- "$WL/cuda/runtime_wl_shared" >/dev/null 2>"$TMP/small.err"
if grep -qE 'a timeline of 50 CUDA calls \(159 dropped' "$TMP/small.err" && python3 -c "import json,sys; json.load(open(sys.argv[1]))" "$TMP/small.json"; then
	pass "max-events-bound"
else
	fail "max-events-bound" "$(cat "$TMP/small.err")"
fi
if "$GPUBPF" record --trace --format folded -p 1 -o "$TMP/x" 2>"$TMP/bad.err"; then
	fail "trace-format-conflict" "accepted"
else
	grep -q 'does not take --format' "$TMP/bad.err" && pass "trace-format-conflict" || fail "trace-format-conflict" "$(cat "$TMP/bad.err")"
fi
