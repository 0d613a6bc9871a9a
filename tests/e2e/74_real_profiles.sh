#!/usr/bin/env bash
# gpubpf report on the profiles recorded on a real H100 (tests/fixtures/gpu/): every number
# it prints (calls, waits, launches and device time per kernel, copies, top functions,
# percentages, averages) recomputed by tests/e2e/report_check.py from go tool pprof's
# reading of the same file. The checker itself is checked: one number changed in a
# report must be caught.
source "$(dirname "$0")/lib.sh"
need_go
FX=tests/fixtures/gpu
if ! ls "$FX"/*.pb.gz >/dev/null 2>&1; then
	skip all "no fixtures under $FX"
	exit 0
fi
for f in "$FX"/*.pb.gz; do
	name=$(basename "$f" .pb.gz)
	if ! "$GPUBPF" report --raw --top 0 "$f" >"$TMP/$name.txt" 2>"$TMP/$name.err"; then
		fail "$name" "report failed: $(cat "$TMP/$name.err")"
		continue
	fi
	if python3 tests/e2e/report_check.py "$TMP/$name.txt" "$f" >"$TMP/$name.check" 2>&1; then
		pass "$name:$(tail -1 "$TMP/$name.check" | tr ' ' '-')"
	else
		fail "$name" "$(tail -4 "$TMP/$name.check" | tr '\n' ';')"
	fi
done
# the checker catches a wrong number (the first launch count of the kernel table, +1)
f=$FX/train-exact.pb.gz
awk '/^GPU kernel summary/ { k = 1 } k && /^ +[0-9]+ / && !done { sub(/[0-9]+/, $1 + 1); done = 1 } { print }' \
	"$TMP/train-exact.txt" >"$TMP/tampered.txt"
if cmp -s "$TMP/train-exact.txt" "$TMP/tampered.txt"; then
	fail "checker-catches-a-wrong-number" "the report was not changed: the check proves nothing"
elif python3 tests/e2e/report_check.py "$TMP/tampered.txt" "$f" >/dev/null 2>&1; then
	fail "checker-catches-a-wrong-number" "a changed launch count went unnoticed"
else
	pass "checker-catches-a-wrong-number"
fi
