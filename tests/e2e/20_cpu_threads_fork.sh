#!/usr/bin/env bash
# Thread labels of a multi-threaded target; children forked after attach are followed
# (and not with --no-inherit), across exec too.
source "$(dirname "$0")/lib.sh"
need_root
need_go

# Threads: each named thread's function appears with its thread_name.
out=$TMP/thr.pb.gz
"$GPUBPF" record -F 499 -o "$out" -- "$WL/cpu_threads" 2 >"$TMP/thr.log" 2>&1
check "threads-record" test -s "$out"
pprof -tagfocus=thread_name=wl-one -top "$out" >"$TMP/one" 2>&1
pprof -tagfocus=thread_name=wl-two -top "$out" >"$TMP/two" 2>&1
if grep -q spin_one "$TMP/one" && ! grep -q spin_two "$TMP/one" && grep -q spin_two "$TMP/two"; then
	pass "thread-names"
else
	fail "thread-names" "wl-one: $(grep -c spin "$TMP/one") lines; wl-two: $(grep -c spin "$TMP/two")"
fi

# Fork after attach: -p on a gated parent, then release it.
run_fork() { # name, extra options
	local name=$1
	shift
	start_gated "$WL/cpu_fork" 2 || { fail "$name" "workload did not start"; return; }
	"$GPUBPF" record -F 499 -p "$WL_PID" -o "$TMP/$name.pb.gz" "$@" >"$TMP/$name.log" 2>&1 &
	local rec=$!
	wait_attached "$rec" || { fail "$name" "gpubpf did not attach: $(cat "$TMP/$name.log")"; return; }
	release_gated
	wait "$rec"
	local rc=$?
	[ $rc -eq 0 ] || { fail "$name" "gpubpf exited $rc: $(tail -3 "$TMP/$name.log")"; return; }
	pprof -top "$TMP/$name.pb.gz" >"$TMP/$name.top"
	pprof -tags "$TMP/$name.pb.gz" >"$TMP/$name.tags"
}
run_fork inherit
if grep -q child_work "$TMP/inherit.top" && grep -q parent_work "$TMP/inherit.top"; then
	pass "children-followed"
else
	fail "children-followed" "$(head -20 "$TMP/inherit.top")"
fi
# three processes: the parent, the forked child, the exec'd child
npids=$(awk '/^ *pid: Total/{f=1; next} /^ *[a-z_]+: Total/{f=0} f && /\): *[0-9]+$/' "$TMP/inherit.tags" | wc -l)
if [ "$npids" -ge 3 ]; then pass "three-processes"; else fail "three-processes" "pids: $npids: $(cat "$TMP/inherit.tags")"; fi
run_fork noinherit --no-inherit
if grep -q parent_work "$TMP/noinherit.top" && ! grep -q child_work "$TMP/noinherit.top"; then
	pass "no-inherit"
else
	fail "no-inherit" "$(head -20 "$TMP/noinherit.top")"
fi
