// SPDX-License-Identifier: MIT
/* Terminal escaping of target-chosen names (userspace/lib/ttyesc.c). */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "test.h"
#include "ttyesc.h"

static const char *esc(const char *in, size_t len)
{
	static char out[512];

	ttyesc__string(in, len, out, sizeof(out));
	return out;
}

#define E(lit) esc(lit, sizeof(lit) - 1)

TEST(plain_text_unchanged)
{
	CHECK_STR(E("train_step (train.py:88)\n"), "train_step (train.py:88)\n");
	CHECK_STR(E("a\tb"), "a\tb");
	CHECK_STR(E("std::vector<int>::size() const"), "std::vector<int>::size() const");
}

TEST(controls_escaped)
{
	/* retitle the terminal, clear it, ring its bell */
	CHECK_STR(E("\x1b]0;pwned\x07"), "\\x1b]0;pwned\\x07");
	CHECK_STR(E("\x1b[2J\x1b[H"), "\\x1b[2J\\x1b[H");
	CHECK_STR(E("a\rb\x7f\x01"), "a\\x0db\\x7f\\x01");
	CHECK_STR(E("nul\0x"), "nul\\x00x");
}

TEST(utf8_kept_c1_and_invalid_escaped)
{
	CHECK_STR(E("h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9d\x84\x9e"), "h\xc3\xa9llo \xe2\x9c\x93 \xf0\x9d\x84\x9e");
	/* C1 CSI encoded in UTF-8, and raw */
	CHECK_STR(E("\xc2\x9b"
		    "2J"),
		  "\\xc2\\x9b2J");
	CHECK_STR(E("\x9b"
		    "2J"),
		  "\\x9b2J");
	/* overlong '/', a surrogate, past U+10FFFF, a stray continuation, cut short */
	CHECK_STR(E("\xc0\xaf"), "\\xc0\\xaf");
	CHECK_STR(E("\xed\xa0\x80"), "\\xed\\xa0\\x80");
	CHECK_STR(E("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
	CHECK_STR(E("\x80x"), "\\x80x");
	CHECK_STR(E("\xe2\x9cx"), "\\xe2\\x9cx");
	CHECK_STR(E("end\xe2\x9c"), "end\\xe2\\x9c");
}

TEST(stream_across_writes)
{
	char buf[256] = {0};
	FILE *mem = fmemopen(buf, sizeof(buf), "w"), *f;

	CHECK(mem);
	f = ttyesc__open(mem);
	CHECK(f);
	setvbuf(f, NULL, _IONBF, 0);
	/* a check mark split over three writes, then an escape split over two */
	fputc(0xe2, f);
	fputc(0x9c, f);
	fputs("\x93 ok \x1b", f);
	fputs("[31m\n", f);
	fputc(0xe2, f); /* left unfinished at close */
	CHECK(fclose(f) == 0);
	fclose(mem);
	CHECK_STR(buf, "\xe2\x9c\x93 ok \\x1b[31m\n\\xe2");
}

TEST(truncation_keeps_whole_escapes)
{
	char out[8];

	CHECK_INT(ttyesc__string("ab\x1b\x1b", 4, out, sizeof(out)), 6);
	CHECK_STR(out, "ab\\x1b");
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(plain_text_unchanged);
	RUN(controls_escaped);
	RUN(utf8_kept_c1_and_invalid_escaped);
	RUN(stream_across_writes);
	RUN(truncation_keeps_whole_escapes);
	return T_END();
}
