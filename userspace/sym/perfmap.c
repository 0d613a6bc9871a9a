// SPDX-License-Identifier: MIT
#include <errno.h>
#include <string.h>

#include "perfmap.h"

static int parse_hex(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int n = 0;

	/* perf itself reads these with strtoull(, 16), which takes an optional 0x. */
	if (end - s > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	while (s < end) {
		char c = *s;
		int d;

		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			break;
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

int perfmap__parse_line(const char *line, size_t len, uint64_t *start, uint64_t *size, const char **name,
			size_t *name_len)
{
	const char *p, *end;

	*start = *size = 0;
	*name = NULL;
	*name_len = 0;
	if (!line)
		return -EINVAL;
	p = line;
	end = line + len;
	if (end > p && end[-1] == '\n')
		end--;
	if (end > p && end[-1] == '\r')
		end--;
	if (memchr(p, '\n', (size_t)(end - p)) || memchr(p, '\0', (size_t)(end - p)))
		return -EINVAL;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (parse_hex(&p, end, start) || p == end || (*p != ' ' && *p != '\t'))
		return -EINVAL;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	if (parse_hex(&p, end, size) || p == end || (*p != ' ' && *p != '\t'))
		return -EINVAL;
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	/* The name is the rest of the line: JIT names often contain spaces. */
	while (end > p && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	if (p == end || *size == 0 || *start + *size < *start)
		return -EINVAL;
	*name = p;
	*name_len = (size_t)(end - p);
	return 0;
}
