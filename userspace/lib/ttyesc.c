// SPDX-License-Identifier: MIT
#define _GNU_SOURCE /* fopencookie */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ttyesc.h"

struct esc {
	FILE *out;
	unsigned char pend[4]; /* an unfinished UTF-8 sequence */
	int npend, need;       /* bytes held, bytes the sequence has in all */
};

/* Bytes a UTF-8 sequence starting with C has, or 0 when C cannot start one. Overlong
 * two-byte leads (0xC0, 0xC1) and leads past U+10FFFF (0xF5..) cannot. */
static int seq_len(unsigned char c)
{
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return 2;
	if (c >= 0xe0 && c <= 0xef)
		return 3;
	if (c >= 0xf0 && c <= 0xf4)
		return 4;
	return 0;
}

/* Whether the complete sequence S (N bytes) is valid, shortest-form UTF-8 that is not a
 * C1 control, a surrogate or past U+10FFFF. */
static bool seq_ok(const unsigned char *s, int n)
{
	uint32_t cp;

	for (int i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return false;
	if (n == 2)
		cp = (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f);
	else if (n == 3)
		cp = (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
	else
		cp = (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 | (uint32_t)(s[2] & 0x3f) << 6 |
		     (s[3] & 0x3f);
	if (n == 2)
		return cp >= 0xa0; /* U+0080..U+009F are the C1 controls */
	if (n == 3)
		return cp >= 0x800 && (cp < 0xd800 || cp > 0xdfff);
	return cp >= 0x10000 && cp <= 0x10ffff;
}

typedef void (*emit_fn)(void *ctx, const char *s, size_t n);

static void emit_hex(emit_fn emit, void *ctx, unsigned char c)
{
	static const char hex[] = "0123456789abcdef";
	char b[4] = {'\\', 'x', hex[c >> 4], hex[c & 15]};

	emit(ctx, b, 4);
}

static void flush_pending(struct esc *e, emit_fn emit, void *ctx)
{
	for (int i = 0; i < e->npend; i++)
		emit_hex(emit, ctx, e->pend[i]);
	e->npend = e->need = 0;
}

static void feed(struct esc *e, const unsigned char *in, size_t len, emit_fn emit, void *ctx)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = in[i];

		if (e->npend) {
			if ((c & 0xc0) == 0x80) {
				e->pend[e->npend++] = c;
				if (e->npend < e->need)
					continue;
				if (seq_ok(e->pend, e->npend)) {
					emit(ctx, (const char *)e->pend, (size_t)e->npend);
					e->npend = e->need = 0;
				} else {
					flush_pending(e, emit, ctx);
				}
				continue;
			}
			/* cut short: what was held is not text; C starts afresh */
			flush_pending(e, emit, ctx);
		}
		if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) {
			emit(ctx, (const char *)&in[i], 1);
			continue;
		}
		if (c < 0x80 || !seq_len(c)) {
			emit_hex(emit, ctx, c);
			continue;
		}
		e->pend[0] = c;
		e->npend = 1;
		e->need = seq_len(c);
	}
}

static void emit_file(void *ctx, const char *s, size_t n)
{
	fwrite(s, 1, n, (FILE *)ctx);
}

static ssize_t esc_write(void *cookie, const char *buf, size_t len)
{
	struct esc *e = cookie;

	feed(e, (const unsigned char *)buf, len, emit_file, e->out);
	if (ferror(e->out)) {
		errno = EIO;
		return -1;
	}
	return (ssize_t)len;
}

static int esc_close(void *cookie)
{
	struct esc *e = cookie;
	int err;

	flush_pending(e, emit_file, e->out);
	err = fflush(e->out) ? -1 : 0;
	free(e);
	return err;
}

FILE *ttyesc__open(FILE *out)
{
	cookie_io_functions_t io = {.write = esc_write, .close = esc_close};
	struct esc *e = calloc(1, sizeof(*e));
	FILE *f;

	if (!e)
		return NULL;
	e->out = out;
	f = fopencookie(e, "w", io);
	if (!f)
		free(e);
	return f;
}

struct sbuf {
	char *p;
	size_t n, cap;
};

static void emit_buf(void *ctx, const char *s, size_t n)
{
	struct sbuf *b = ctx;

	if (b->n + n >= b->cap)
		return; /* truncated: whole escapes or nothing */
	memcpy(b->p + b->n, s, n);
	b->n += n;
}

size_t ttyesc__string(const char *in, size_t len, char *out, size_t outlen)
{
	struct esc e = {0};
	struct sbuf b = {out, 0, outlen};

	if (!outlen)
		return 0;
	feed(&e, (const unsigned char *)in, len, emit_buf, &b);
	flush_pending(&e, emit_buf, &b);
	out[b.n] = '\0';
	return b.n;
}
