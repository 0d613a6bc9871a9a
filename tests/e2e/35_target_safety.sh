#!/usr/bin/env bash
# gpubpf runs as root on production hosts: it must never harm its target, never copy
# what a target could not read into a profile, never clobber what -o names, and say
# clearly what went wrong. Each check here failed on commit cde4c11.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/cuda_lib.sh"
need_root
need_go

# state PID: the one-letter state of a process ("" when gone).
state() { sed -n 's/^[0-9]* (.*) \([A-Za-z]\) .*/\1/p' "/proc/$1/stat" 2>/dev/null; }

# not_stopped_within PID SECONDS: 0 once PID is gone or not stopped ('T'), within SECONDS.
not_stopped_within() {
	local end=$((SECONDS + $2))
	while [ $SECONDS -le $end ]; do
		[ "$(state "$1")" != T ] && return 0
		sleep 0.1
	done
	return 1
}

# ---- 1. a started command is never left stopped ---------------------------------------

# The deterministic case: gpubpf is stopped while the command execs (the exec holds it),
# then killed. Nothing of gpubpf is left to resume it but its guardian.
"$GPUBPF" record -o "$TMP/h.pb.gz" -- sh -c "sleep 2; exec $WL/cpu_ratio 3" >"$TMP/h.log" 2>&1 &
rec=$!
KILL_PIDS+=("$rec")
sleep 0.7
kill -STOP "$rec"
sleep 2.5
wl=$(pgrep -f "^$WL/cpu_ratio 3$" | head -1)
st=$(state "$wl")
kill -KILL "$rec"
if [ -z "$wl" ]; then
	fail "killed-while-holding:held" "the command never reached its exec: $(cat "$TMP/h.log")"
elif [ "$st" != T ]; then
	fail "killed-while-holding:held" "the command was not held at its exec (state '$st'): the check proves nothing"
elif not_stopped_within "$wl" 3; then
	pass "killed-while-holding"
else
	fail "killed-while-holding" "pid $wl still stopped 3 s after gpubpf was killed"
fi
kill -9 "$wl" 2>/dev/null
sleep 1.2
if pgrep -x gpubpf-guard >/dev/null; then
	# another gpubpf may be running on this machine: only ours must be gone
	if ps -o ppid= -C gpubpf-guard | grep -qw "$rec"; then fail "guardian-gone" "still running"; else pass "guardian-gone"; fi
else
	pass "guardian-gone"
fi

# Signals at random moments of the start-up, when the command is held at each library it
# loads (python3 loads a dozen C extensions): never a stopped command afterwards.
py_imports='import json, decimal, ctypes, hashlib, sqlite3, ssl, zlib, bz2, lzma, csv, array, select, socket, time; time.sleep(4)'
stuck=0
runs=0
for sig_delay in KILL:0.2 KILL:0.35 KILL:0.5 KILL:0.6 KILL:0.7 KILL:0.8 KILL:0.8 KILL:0.9 KILL:1.0 KILL:1.2 KILL:2 INT:0.2 INT:0.35 INT:0.5 TERM:0.25 TERM:0.45 TERM:0.7; do
	sig=${sig_delay%%:*}
	delay=${sig_delay#*:}
	"$GPUBPF" record -o "$TMP/r.pb.gz" -- python3 -c "$py_imports" >"$TMP/r.log" 2>&1 &
	rec=$!
	sleep "$delay"
	child=$(pgrep -P "$rec" -x python3 | head -1)
	kill -"$sig" "$rec" 2>/dev/null
	wait "$rec" 2>/dev/null
	runs=$((runs + 1))
	if [ -n "$child" ] && ! not_stopped_within "$child" 3; then
		stuck=$((stuck + 1))
		echo "SIG$sig after ${delay}s: python3 $child left stopped" >>"$TMP/stuck.log"
	fi
	[ -n "$child" ] && kill -9 "$child" 2>/dev/null
done
if [ $stuck -eq 0 ]; then pass "random-signals-never-leave-stopped"; else fail "random-signals-never-leave-stopped" "$stuck of $runs: $(cat "$TMP/stuck.log")"; fi

# -p: an attached process is never stopped, even while it loads libraries all the time.
python3 -c '
import ctypes, _ctypes, time
end = time.time() + 30
while time.time() < end:
    for lib in ("libz.so.1", "libbz2.so.1.0", "liblzma.so.5"):
        h = ctypes.CDLL(lib)
        _ctypes.dlclose(h._handle)
' &
loader=$!
KILL_PIDS+=("$loader")
"$GPUBPF" record -d 3 -p "$loader" -o "$TMP/p.pb.gz" >"$TMP/p.log" 2>&1 &
rec=$!
stopped=0
for _ in $(seq 250); do
	[ "$(state "$loader")" = T ] && stopped=$((stopped + 1))
	sleep 0.01
done
wait "$rec"
rc=$?
kill -9 "$loader" 2>/dev/null
if [ $rc -eq 0 ] && [ $stopped -eq 0 ]; then pass "attached-never-stopped"; else fail "attached-never-stopped" "rc=$rc, seen stopped $stopped times"; fi

# ---- 2. exec-heavy targets ----------------------------------------------------------------

# 2,000 short processes under a 300-file limit, then a CUDA program: gpubpf's descriptors
# stay flat, the last child is probed like the first, and gpubpf ends promptly.
if [ "${HAVE_CUDA:-}" = 1 ] && [ -x "$CUDA_WL/dlopen_wl" ]; then
	(
		ulimit -Sn 300 && ulimit -Hn 300 &&
			exec "$GPUBPF" record --exact -o "$TMP/eh.pb.gz" -- sh -c \
				"i=0; while [ \$i -lt 2000 ]; do /bin/true; i=\$((i+1)); done; exec $CUDA_WL/dlopen_wl"
	) >"$TMP/eh.log" 2>&1 &
	rec=$!
	maxfd=0
	while kill -0 "$rec" 2>/dev/null; do
		n=$(ls "/proc/$rec/fd" 2>/dev/null | wc -l)
		[ "$n" -gt "$maxfd" ] && maxfd=$n
		grep -q "^gpubpf: wrote" "$TMP/eh.log" && break
		sleep 0.2
	done
	t_written=$SECONDS
	wait "$rec"
	rc=$?
	tail_s=$((SECONDS - t_written))
	launches=$(pprof -sample_index=cuda_launches -top "$TMP/eh.pb.gz" | sed -n 's/.*accounting for \([0-9]*\),.*/\1/p' | head -1)
	if [ $rc -eq 0 ] && [ "$maxfd" -lt 150 ]; then pass "exec-heavy-fds-flat"; else fail "exec-heavy-fds-flat" "rc=$rc, up to $maxfd open files: $(tail -2 "$TMP/eh.log")"; fi
	if [ "${launches:-0}" = 40 ]; then pass "exec-heavy-last-child-probed"; else fail "exec-heavy-last-child-probed" "launches '${launches:-}' (want 40): $(tail -2 "$TMP/eh.log")"; fi
	if [ $tail_s -le 3 ]; then pass "exec-heavy-exits-promptly"; else fail "exec-heavy-exits-promptly" "${tail_s}s after the profile was written"; fi
else
	skip "exec-heavy" "no CUDA workloads (HAVE_CUDA=${HAVE_CUDA:-}): the last child's probes cannot be checked"
fi

# ---- 3. a root-only file never becomes symbol names --------------------------------------
# (tests/unit/test_syms_perfmap.c perf_map_is_the_targets_own covers the symlink, another user's
# file and a FIFO at the perf map's path in detail; here, the whole recording.)
mkdir -m 700 "$TMP/secret"
printf '0 ffffffffffff ROOT_ONLY_SECRET\n' >"$TMP/secret/map"
chmod 600 "$TMP/secret/map"
chmod 755 "$TMP"
# cpu_jit runs its spin loop from anonymous memory: only a perf map can name it. As
# nobody, it first makes its perf map a symlink to a root-only file.
if "$WL/cpu_jit" 0 >/dev/null 2>&1; then
	setpriv --reuid=65534 --regid=65534 --clear-groups sh -c \
		"ln -sf $TMP/secret/map /tmp/perf-\$\$.map; exec $WL/cpu_jit 1.5" >/dev/null 2>&1 &
	victim=$!
	KILL_PIDS+=("$victim")
	"$GPUBPF" record -p "$victim" -o "$TMP/leak.pb.gz" >"$TMP/leak.log" 2>&1
	rm -f "/tmp/perf-$victim.map"
	# the control: its own perf map names the same code
	setpriv --reuid=65534 --regid=65534 --clear-groups "$WL/cpu_jit" 1.5 --perf-map >/dev/null 2>&1 &
	own=$!
	KILL_PIDS+=("$own")
	"$GPUBPF" record -p "$own" -o "$TMP/own.pb.gz" >"$TMP/own.log" 2>&1
	rm -f "/tmp/perf-$own.map"
	if pprof -raw "$TMP/leak.pb.gz" | grep -q ROOT_ONLY_SECRET; then
		fail "no-root-only-file-in-profile" "the root-only file's lines are symbol names in the profile"
	elif ! pprof -top "$TMP/own.pb.gz" | grep -q jit_spin; then
		fail "no-root-only-file-in-profile" "the target's own perf map did not name its code: the check proves nothing"
	else
		pass "no-root-only-file-in-profile"
	fi
	grep -q "not reading its /tmp/perf-$victim.map" "$TMP/leak.log" && pass "refused-perf-map-said" ||
		fail "refused-perf-map-said" "$(cat "$TMP/leak.log")"
else
	skip "no-root-only-file-in-profile" "cpu_jit runs on x86-64 only (tests/unit/test_syms_perfmap.c checks the rule on every machine)"
fi

# ---- 4. -o never replaces a device or a FIFO; 5. profiles are private -----------------
# Private nodes of the same devices: a gpubpf that clobbers them must not break the
# machine's own /dev/full and /dev/null for everything else running.
mknod -m 666 "$TMP/full" c 1 7
mknod -m 666 "$TMP/null" c 1 3
"$GPUBPF" record -d 0.3 -o "$TMP/full" -- sleep 1 >"$TMP/full.log" 2>&1
rc=$?
if [ $rc -ne 0 ] && [ -c "$TMP/full" ] && grep -q "No space left on device" "$TMP/full.log"; then pass "dev-full-error"; else fail "dev-full-error" "rc=$rc, $(ls -l "$TMP/full"): $(tail -1 "$TMP/full.log")"; fi
"$GPUBPF" record -d 0.3 -o "$TMP/null" -- sleep 1 >"$TMP/null.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && [ -c "$TMP/null" ]; then pass "dev-null-in-place"; else fail "dev-null-in-place" "rc=$rc, $(ls -l "$TMP/null")"; fi
mkfifo "$TMP/fifo"
cat "$TMP/fifo" >"$TMP/from-fifo.pb.gz" &
reader=$!
"$GPUBPF" record -d 0.5 -o "$TMP/fifo" -- "$WL/cpu_ratio" 1 >"$TMP/fifo.log" 2>&1
rc=$?
wait "$reader"
if [ $rc -eq 0 ] && [ -p "$TMP/fifo" ] && pprof -raw "$TMP/from-fifo.pb.gz" >/dev/null; then pass "fifo-in-place"; else fail "fifo-in-place" "rc=$rc $(tail -1 "$TMP/fifo.log")"; fi

"$GPUBPF" record -d 0.3 -o "$TMP/new.pb.gz" -- sleep 1 >/dev/null 2>&1
if [ "$(stat -c %a "$TMP/new.pb.gz")" = 600 ]; then pass "new-profile-0600"; else fail "new-profile-0600" "mode $(stat -c %a "$TMP/new.pb.gz")"; fi
chmod 640 "$TMP/new.pb.gz"
chown 65534:65534 "$TMP/new.pb.gz"
"$GPUBPF" record -d 0.3 -o "$TMP/new.pb.gz" -- sleep 1 >/dev/null 2>&1
if [ "$(stat -c '%a %u' "$TMP/new.pb.gz")" = "640 65534" ]; then pass "existing-mode-kept"; else fail "existing-mode-kept" "$(stat -c '%a %u' "$TMP/new.pb.gz")"; fi
"$GPUBPF" help record | grep -q "0600" && pass "help-says-0600" || fail "help-says-0600" "record --help does not say how profiles are created"

# ---- 6. a full disk says so ---------------------------------------------------------------
mkdir "$TMP/small"
if mount -t tmpfs -o size=64k tmpfs "$TMP/small" 2>/dev/null; then
	cat /dev/zero >"$TMP/small/filler" 2>/dev/null # to the last byte
	"$GPUBPF" record -d 1 -o "$TMP/small/p.pb.gz" -- "$WL/cpu_ratio" 1 >"$TMP/enospc.log" 2>&1
	rc=$?
	left=$(ls -A "$TMP/small" | grep -v '^filler$')
	umount "$TMP/small"
	if [ $rc -eq 28 ] && grep -q "No space left on device" "$TMP/enospc.log" && [ -z "$left" ]; then
		pass "full-disk-enospc"
	else
		fail "full-disk-enospc" "rc=$rc, left: '$left': $(tail -1 "$TMP/enospc.log")"
	fi
else
	skip "full-disk-enospc" "cannot mount a small tmpfs here"
fi

# ---- 7. report escapes target-chosen names on a terminal -------------------------------
python3 tests/e2e/mkpprof.py "$TMP/esc.pb.gz" samples/count -- 'main;evil\x1b[2J\x1b[Hname\x07=5' 'main;fine=3'
script -qec "$GPUBPF report $TMP/esc.pb.gz" /dev/null >"$TMP/esc.tty" 2>&1
if grep -q $'\x1b\[2J' "$TMP/esc.tty" || grep -q $'\x07' "$TMP/esc.tty"; then
	fail "report-escapes-on-tty" "raw escape sequences reached the terminal"
elif grep -qF 'evil\x1b[2J\x1b[Hname\x07' "$TMP/esc.tty"; then
	pass "report-escapes-on-tty"
else
	fail "report-escapes-on-tty" "$(grep evil "$TMP/esc.tty" | cat -v)"
fi

# ---- 8. a gzip bomb is refused at once; sums saturate -----------------------------------
python3 - "$TMP/bomb.pb.gz" <<'EOF'
import gzip, sys
n = 900 << 20
hdr = bytearray([0x32])  # field 6 (string_table), length-delimited
while True:
    b = n & 0x7F
    n >>= 7
    hdr.append(b | (0x80 if n else 0))
    if not n:
        break
with gzip.open(sys.argv[1], "wb", compresslevel=9) as f:
    f.write(bytes(hdr))
    for _ in range(900):
        f.write(b"A" * (1 << 20))
EOF
for cmd in report convert; do
	args=("$TMP/bomb.pb.gz")
	[ $cmd = convert ] && args+=(-o "$TMP/bomb.folded" --format folded)
	start=$(date +%s.%N)
	/usr/bin/time -f %M -o "$TMP/bomb.rss" "$GPUBPF" $cmd "${args[@]}" >"$TMP/bomb.log" 2>&1
	rc=$?
	took=$(echo "$(date +%s.%N) - $start" | bc)
	rss=$(tail -1 "$TMP/bomb.rss")
	if [ $rc -ne 0 ] && grep -q "refused" "$TMP/bomb.log" && [ "$(echo "$took < 2" | bc)" = 1 ] && [ "$rss" -lt 100000 ]; then
		pass "bomb-refused-early:$cmd"
	else
		fail "bomb-refused-early:$cmd" "rc=$rc in ${took}s, ${rss} KB: $(tail -1 "$TMP/bomb.log")"
	fi
done
python3 tests/e2e/mkpprof.py "$TMP/sat.pb.gz" samples/count -- 'main;big=9223372036854775807' 'main;big=9223372036854775807' 'main;small=1'
"$GPUBPF" report "$TMP/sat.pb.gz" >"$TMP/sat.txt" 2>&1
if grep -q "Capped:" "$TMP/sat.txt" && grep -q "9223372036854775807.*big" "$TMP/sat.txt" && ! grep -qE -- '-[0-9]{6,}' "$TMP/sat.txt"; then
	pass "sums-saturate-and-say-so"
else
	fail "sums-saturate-and-say-so" "$(tail -5 "$TMP/sat.txt")"
fi

# ---- 9. names are those of the moment of each sample ---------------------------------------
"$GPUBPF" record -F 199 -o "$TMP/names.pb.gz" -- "$WL/cpu_rename" 1 >"$TMP/names.log" 2>&1
pprof -raw "$TMP/names.pb.gz" | python3 -c '
import collections, re, sys
c = collections.Counter()
cur = None
for line in sys.stdin:
    m = re.match(r"\s+(\d+)\s+\d+.*: ", line)
    if m:
        cur = int(m.group(1))
        continue
    m = re.search(r"process_name:\[([^\]]*)\] thread_name:\[([^\]]*)\]", line)
    if m and cur is not None:
        c[m.groups()] += cur
        cur = None
for (p, t), n in sorted(c.items()):
    print(n, p, t)
' >"$TMP/names.txt"
n_of() { awk -v p="$1" -v t="$2" '$2 == p && $3 == t { s += $1 } END { print s + 0 }' "$TMP/names.txt"; }
ok=1
for pt in "phase-one phase-one" "phase-one wl-worker" "phase-two phase-two" "phase-two wl-worker" "phase-three phase-three"; do
	[ "$(n_of $pt)" -ge 60 ] || ok=0
done
if grep -qw gpubpf "$TMP/names.txt"; then ok=0; fi
# no sample of one moment under the other moment's names: phase-two never with phase-one's process
[ "$(n_of phase-one phase-two)" -eq 0 ] && [ "$(n_of phase-two phase-one)" -eq 0 ] || ok=0
if [ $ok = 1 ]; then pass "names-of-the-moment"; else fail "names-of-the-moment" "$(tr '\n' ';' <"$TMP/names.txt")"; fi

# ---- 10. targets with nothing to see say so ---------------------------------------------
"$GPUBPF" record -d 0.5 -p 2 -o "$TMP/k.pb.gz" >"$TMP/k.log" 2>&1
grep -q "kernel thread" "$TMP/k.log" && pass "kernel-thread-said" || fail "kernel-thread-said" "$(cat "$TMP/k.log")"
sleep 30 &
sleeper=$!
KILL_PIDS+=("$sleeper")
"$GPUBPF" record -d 0.5 -p "$sleeper" -o "$TMP/s.pb.gz" >"$TMP/s.log" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "nothing was recorded: pid $sleeper (sleep).*asleep" "$TMP/s.log"; then pass "idle-target-said"; else fail "idle-target-said" "rc=$rc: $(cat "$TMP/s.log")"; fi
sh -c "exec $GPUBPF record -d 0.5 -p \$\$ -o $TMP/self.pb.gz" >"$TMP/self.log" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "does not profile itself" "$TMP/self.log" && [ ! -e "$TMP/self.pb.gz" ]; then pass "self-refused"; else fail "self-refused" "rc=$rc: $(cat "$TMP/self.log")"; fi
