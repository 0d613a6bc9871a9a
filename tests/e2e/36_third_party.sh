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
