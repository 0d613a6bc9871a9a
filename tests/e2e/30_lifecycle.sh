#!/usr/bin/env bash
# A target that exits mid-recording; Ctrl-C (once and twice); -d expiry; the folded
# format; -a. The output is complete every time.
source "$(dirname "$0")/lib.sh"
need_root
need_go

# Target exits long before -d: gpubpf stops with it, and its frames still resolve.
"$WL/cpu_ratio" 1.5 >/dev/null &
wl=$!
start=$SECONDS
"$GPUBPF" record -F 499 -d 60 -p "$wl" -o "$TMP/exit.pb.gz" >"$TMP/exit.log" 2>&1
rc=$?
took=$((SECONDS - start))
if [ $rc -eq 0 ] && [ $took -lt 10 ]; then pass "stops-when-target-exits"; else fail "stops-when-target-exits" "rc=$rc after ${took}s"; fi
pprof -top "$TMP/exit.pb.gz" >"$TMP/exit.top"
grep -q leaf_c "$TMP/exit.top" && pass "exited-target-symbolized" || fail "exited-target-symbolized" "$(head "$TMP/exit.top")"

# A command that fails: its status is record's (128+N for signal N, as a shell says it),
# and the profile is written all the same.
for c in "exit 3:3" "kill -TERM \$\$:143"; do
	"$GPUBPF" record -F 499 -o "$TMP/st.pb.gz" -- sh -c "$WL/cpu_ratio 0.3 >/dev/null; ${c%%:*}" >"$TMP/st.log" 2>&1
	rc=$?
	if [ $rc -eq "${c##*:}" ] && pprof -top "$TMP/st.pb.gz" >"$TMP/st.top" && grep -q leaf_c "$TMP/st.top"; then
		pass "job-status-${c##*:}"
	else
		fail "job-status-${c##*:}" "rc=$rc (want ${c##*:}) $(tail -2 "$TMP/st.log")"
	fi
	rm -f "$TMP/st.pb.gz"
done

# Ctrl-C once.
"$GPUBPF" record -F 499 -o "$TMP/int.pb.gz" -- "$WL/cpu_ratio" 30 >"$TMP/int.log" 2>&1 &
rec=$!
KILL_PIDS+=("$rec")
wait_attached "$rec"
sleep 1
kill -INT "$rec"
wait "$rec"
rc=$?
pkill -f "$WL/cpu_ratio 30" 2>/dev/null
if [ $rc -eq 0 ] && pprof -top "$TMP/int.pb.gz" >"$TMP/int.top" && grep -q leaf_c "$TMP/int.top"; then
	pass "sigint-complete-file"
else
	fail "sigint-complete-file" "rc=$rc $(tail -2 "$TMP/int.log")"
fi

# Ctrl-C twice in a row: still a complete file, never a torn one.
"$GPUBPF" record -F 499 -o "$TMP/int2.pb.gz" -- "$WL/cpu_ratio" 30 >"$TMP/int2.log" 2>&1 &
rec=$!
KILL_PIDS+=("$rec")
wait_attached "$rec"
sleep 1
kill -INT "$rec"
kill -INT "$rec"
wait "$rec"
rc=$?
pkill -f "$WL/cpu_ratio 30" 2>/dev/null
if [ $rc -eq 0 ] && pprof -raw "$TMP/int2.pb.gz" >/dev/null; then
	pass "double-sigint-complete-file"
else
	fail "double-sigint-complete-file" "rc=$rc $(tail -2 "$TMP/int2.log")"
fi
# no temporary files left behind
if ls -A "$TMP" | grep -q '^\.gpubpf-out'; then fail "no-temp-files" "$(ls -A "$TMP")"; else pass "no-temp-files"; fi

# SIGTERM and -d expiry.
"$WL/cpu_ratio" 30 >/dev/null &
wl=$!
KILL_PIDS+=("$wl")
"$GPUBPF" record -d 1.5 -p "$wl" -o "$TMP/d.pb.gz" >"$TMP/d.log" 2>&1
rc=$?
[ $rc -eq 0 ] && pprof -raw "$TMP/d.pb.gz" >/dev/null && pass "duration-expiry" || fail "duration-expiry" "rc=$rc"
"$GPUBPF" record -p "$wl" -o "$TMP/term.pb.gz" >"$TMP/term.log" 2>&1 &
rec=$!
wait_attached "$rec"
sleep 0.5
kill -TERM "$rec"
wait "$rec"
rc=$?
[ $rc -eq 0 ] && pprof -raw "$TMP/term.pb.gz" >/dev/null && pass "sigterm-complete-file" || fail "sigterm-complete-file" "rc=$rc"

# Folded output: "process;frame;...;leaf COUNT" lines, with the known frames.
"$GPUBPF" record -F 499 -d 1.5 -p "$wl" --format folded -o "$TMP/out.folded" >"$TMP/f.log" 2>&1
if grep -qE '^cpu_ratio;.*parent_c;leaf_c [0-9]+$' "$TMP/out.folded" && ! grep -qvE ' [0-9]+$' "$TMP/out.folded"; then
	pass "folded-format"
else
	fail "folded-format" "$(head -3 "$TMP/out.folded")"
fi

# -a: every process, ours among them.
"$GPUBPF" record -a -F 199 -d 1.5 -o "$TMP/all.pb.gz" >"$TMP/all.log" 2>&1
rc=$?
pprof -tagfocus=process_name=cpu_ratio -top "$TMP/all.pb.gz" >"$TMP/all.top"
if [ $rc -eq 0 ] && grep -q leaf_c "$TMP/all.top"; then pass "all-processes"; else fail "all-processes" "rc=$rc $(tail -2 "$TMP/all.log")"; fi
kill "$wl"
