// SPDX-License-Identifier: MIT
#include <errno.h>
#include <string.h>

#include "procmaps.h"

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Strict: at least one digit, no sign, no overflow, stops at the first non-digit. */
static int parse_hex(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int d, n = 0;

	while (s < end && (d = hexval(*s)) >= 0) {
		if (v >> 60)
			return -EINVAL;
		v = (v << 4) | (uint64_t)d;
		s++;
		n++;
	}
	if (!n)
		return -EINVAL;
	*p = s;
	*out = v;
	return 0;
}

static int parse_dec(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int n = 0;

	while (s < end && *s >= '0' && *s <= '9') {
		unsigned d = (unsigned)(*s - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
		s++;
		n++;
	}
	if (!n)
		return -EINVAL;
	*p = s;
	*out = v;
	return 0;
}

static int expect(const char **p, const char *end, char c)
{
	if (*p >= end || **p != c)
		return -EINVAL;
	(*p)++;
	return 0;
}

int procmaps__parse_line(const char *line, size_t len, struct procmaps_entry *e)
{
	static const char deleted[] = " (deleted)";
	const size_t dlen = sizeof(deleted) - 1;
	const char *p, *end;
	uint64_t maj, min;

	memset(e, 0, sizeof(*e));
	if (!line)
		return -EINVAL;
	p = line;
	end = line + len;
	if (end > p && end[-1] == '\n')
		end--;
	/* A '\n' or NUL inside means the caller split lines wrongly or the input is hostile. */
	if (memchr(p, '\n', (size_t)(end - p)) || memchr(p, '\0', (size_t)(end - p)))
		return -EINVAL;

	if (parse_hex(&p, end, &e->start) || expect(&p, end, '-') || parse_hex(&p, end, &e->end) ||
	    expect(&p, end, ' '))
		return -EINVAL;
	if (e->start >= e->end)
		return -EINVAL;
	if (end - p < 4)
		return -EINVAL;
	if ((p[0] != 'r' && p[0] != '-') || (p[1] != 'w' && p[1] != '-') || (p[2] != 'x' && p[2] != '-') ||
	    (p[3] != 'p' && p[3] != 's'))
		return -EINVAL;
	e->read = p[0] == 'r';
	e->write = p[1] == 'w';
	e->exec = p[2] == 'x';
	e->shared = p[3] == 's';
	p += 4;
	if (expect(&p, end, ' ') || parse_hex(&p, end, &e->offset) || expect(&p, end, ' ') ||
	    parse_hex(&p, end, &maj) || expect(&p, end, ':') || parse_hex(&p, end, &min) || expect(&p, end, ' ') ||
	    parse_dec(&p, end, &e->inode))
		return -EINVAL;
	if (maj > UINT32_MAX || min > UINT32_MAX)
		return -EINVAL;
	e->dev_major = (uint32_t)maj;
	e->dev_minor = (uint32_t)min;

	if (p == end)
		return 0; /* anonymous */
	if (*p != ' ' && *p != '\t')
		return -EINVAL;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (p == end)
		return 0;
	/* The path runs to the end of the line and may itself contain spaces. */
	e->path = p;
	e->path_len = (size_t)(end - p);
	if (e->path_len > dlen && !memcmp(end - dlen, deleted, dlen)) {
		e->deleted = true;
		e->path_len -= dlen;
	}
	return 0;
}

bool procmaps__is_file(const struct procmaps_entry *e)
{
	return e->path && e->path_len && e->path[0] == '/';
}

bool procmaps__maybe_exec(const char *line, size_t len)
{
	const char *sp = memchr(line, ' ', len);

	return sp && (size_t)(sp - line) + 3 < len && sp[3] == 'x';
}
