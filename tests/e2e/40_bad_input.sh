#!/usr/bin/env bash
# Bad input: one clear line on stderr, a non-zero exit, no crash, no output file.
source "$(dirname "$0")/lib.sh"

expect_error() { # name, pattern, command...
	local name=$1 pat=$2
	shift 2
	rm -f "$TMP/out.pb.gz"
	(cd "$TMP" && "$@") >"$TMP/$name.out" 2>"$TMP/$name.err"
	local rc=$?
	if [ $rc -eq 0 ] || [ $rc -ge 128 ]; then
		fail "$name" "exit status $rc (want a non-zero status, not a crash)"
	elif ! grep -qiE "$pat" "$TMP/$name.err"; then
		fail "$name" "stderr lacks /$pat/: $(cat "$TMP/$name.err")"
	elif [ "$(wc -l <"$TMP/$name.err")" -gt 2 ]; then
		fail "$name" "more than a line or two: $(cat "$TMP/$name.err")"
	elif ls -A "$TMP" | grep -qE '^out\.pb\.gz$|^\.gpubpf-out'; then
		fail "$name" "left an output file"
	else
		pass "$name"
	fi
}

G=$GPUBPF
expect_error unknown-option 'unknown option' "$G" record --bogus -p 1 -o out.pb.gz
expect_error bad-freq 'invalid -F' "$G" record -F abc -p 1 -o out.pb.gz
expect_error zero-freq 'invalid -F' "$G" record -F 0 -p 1 -o out.pb.gz
expect_error bad-duration 'invalid -d' "$G" record -d -3 -p 1 -o out.pb.gz
expect_error bad-pid 'invalid pid' "$G" record -p 12x -o out.pb.gz
expect_error no-target 'nothing to record' "$G" record -o out.pb.gz
expect_error two-modes 'exclusive' "$G" record -a -p 1 -o out.pb.gz
expect_error bad-format 'unknown --format' "$G" record --format xml -p 1 -o out.pb.gz
expect_error unknown-command 'unknown command' "$G" frobnicate
expect_error missing-arg 'needs an argument' "$G" record -p

# Help teaches and exits 0.
"$G" help record | grep -q -- '--no-inherit' && pass help-record || fail help-record "no usage"
"$G" --version | grep -q '^gpubpf ' && pass version || fail version "no version"

if [ "$(id -u)" != 0 ]; then
	skip root-checks "run as root to check the errors that come after the privilege check"
	exit 0
fi

# Not root: drop to nobody.
if command -v setpriv >/dev/null; then
	cp "$G" "$TMP/gpubpf" && chmod 755 "$TMP" "$TMP/gpubpf"
	expect_error not-root 'permission denied.*root' setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$TMP/gpubpf" record -p 1 -o /tmp/gpubpf-nobody-out.pb.gz
else
	skip not-root "setpriv (util-linux) is missing"
fi
expect_error no-such-pid 'no such process' "$G" record -p 4194000 -o out.pb.gz
expect_error no-btf 'no BTF' env GPUBPF_BTF_PATH=/nonexistent/vmlinux "$G" record -p 1 -o out.pb.gz
expect_error output-dir-missing 'cannot write' "$G" record -p 1 -o /nonexistent/dir/out.pb.gz
expect_error output-is-dir 'cannot write' "$G" record -p 1 -o /tmp
expect_error cannot-exec "cannot execute 'no-such-command-gpubpf'" "$G" record -o out.pb.gz -- no-such-command-gpubpf
printf 'not a program\n' >"$TMP/data.txt"
chmod 644 "$TMP/data.txt"
expect_error exec-not-executable "cannot execute.*Permission denied" "$G" record -o out.pb.gz -- "$TMP/data.txt"
