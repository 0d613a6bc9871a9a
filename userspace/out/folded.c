// SPDX-License-Identifier: MIT
/* Folded-stack writer. Every sample becomes one "process;root;...;leaf" line; lines are
 * sorted so equal stacks (samples that differ only by thread or labels) sit together
 * and are summed, and so the output is the same for the same profile. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folded.h"

struct line {
	char *text;
	int64_t value;
};

struct sbuf {
	char *s;
	size_t len, cap;
	int err;
};

static void sb_grow(struct sbuf *b, size_t more)
{
	size_t cap;
	char *n;

	if (b->err || b->len + more + 1 <= b->cap)
		return;
	cap = b->cap ? b->cap : 256;
	while (cap < b->len + more + 1)
		cap *= 2;
	n = realloc(b->s, cap);
	if (!n) {
		b->err = -ENOMEM;
		return;
	}
	b->s = n;
	b->cap = cap;
}

/* Append one frame name: ';' would split the frame and a newline the line, and a
 * trailing space would read as part of the separator before the value. */
static void sb_name(struct sbuf *b, const char *name)
{
	size_t n = name ? strlen(name) : 0, start;

	sb_grow(b, n + 9);
	if (b->err)
		return;
	start = b->len;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = name[i];

		if (c == ';')
			c = ':';
		else if (c < 0x20 || c == 0x7f)
			c = ' ';
		b->s[b->len++] = c;
	}
	while (b->len > start && b->s[b->len - 1] == ' ')
		b->len--;
	if (b->len == start) {
		memcpy(b->s + b->len, "[unknown]", 9);
		b->len += 9;
	}
	b->s[b->len] = '\0';
}

static void sb_str(struct sbuf *b, const char *s)
{
	size_t n = strlen(s);

	sb_grow(b, n);
	if (b->err)
		return;
	memcpy(b->s + b->len, s, n + 1);
	b->len += n;
}

static void sb_frames(struct sbuf *b, const struct prof_location *loc)
{
	char buf[48];

	if (loc->symbolized && loc->sym.nframes > 0) {
		int nf = loc->sym.nframes > SYMS_MAX_INLINE ? SYMS_MAX_INLINE : loc->sym.nframes;

		/* sym frames are inlined-first: the caller comes first in a folded line */
		for (int i = nf - 1; i >= 0; i--) {
			sb_str(b, ";");
			sb_name(b, loc->sym.frames[i].func);
		}
		return;
	}
	snprintf(buf, sizeof(buf), "%s+0x%llx", loc->kind == PROF_FRAME_KERNEL ? "[kernel.kallsyms]" : "[unknown]",
		 (unsigned long long)loc->addr);
	sb_str(b, ";");
	sb_str(b, buf);
}

static int cmp_line(const void *pa, const void *pb)
{
	const struct line *a = pa, *b = pb;

	return strcmp(a->text, b->text);
}

int folded__write(const struct profile *p, int type_idx, FILE *f)
{
	size_t ns = profile__num_samples(p), nlines = 0;
	struct line *lines = NULL;
	struct sbuf b = {0};
	int err = 0;

	if (!p || !f || type_idx < 0 || type_idx >= profile__num_types(p))
		return -EINVAL;
	if (ns) {
		lines = calloc(ns, sizeof(*lines));
		if (!lines)
			return -ENOMEM;
	}
	for (size_t i = 0; i < ns; i++) {
		const struct prof_sample *s = profile__sample(p, i);
		const char *comm = NULL;
		char pidbuf[24];

		if (!s->values[type_idx])
			continue;
		for (uint32_t j = 0; j < s->nlabels; j++)
			if (s->labels[j].str && strcmp(s->labels[j].key, "process_name") == 0)
				comm = s->labels[j].str;
		b.len = 0;
		if (comm) {
			sb_name(&b, comm);
		} else {
			snprintf(pidbuf, sizeof(pidbuf), "pid %d", s->pid);
			sb_str(&b, pidbuf);
		}
		/* locations are leaf first; folded lines are root first */
		for (uint32_t j = s->nlocs; j-- > 0;) {
			const struct prof_location *loc = profile__location(p, s->locs[j]);

			if (loc)
				sb_frames(&b, loc);
		}
		if (b.err) {
			err = b.err;
			goto out;
		}
		lines[nlines].text = strdup(b.s);
		if (!lines[nlines].text) {
			err = -ENOMEM;
			goto out;
		}
		lines[nlines++].value = s->values[type_idx];
	}
	if (nlines > 1)
		qsort(lines, nlines, sizeof(*lines), cmp_line);
	for (size_t i = 0; i < nlines;) {
		int64_t sum = 0;
		size_t j;

		/* absurd values (another tool's) stop at the limit rather than wrap */
		for (j = i; j < nlines && strcmp(lines[j].text, lines[i].text) == 0; j++)
			if (__builtin_add_overflow(sum, lines[j].value, &sum))
				sum = lines[j].value > 0 ? INT64_MAX : INT64_MIN;
		if (sum && fprintf(f, "%s %lld\n", lines[i].text, (long long)sum) < 0) {
			err = -EIO;
			goto out;
		}
		i = j;
	}
	/* buffered write errors (ENOSPC) only show at flush */
	if (fflush(f) != 0 || ferror(f))
		err = -EIO;
out:
	for (size_t i = 0; i < nlines; i++)
		free(lines[i].text);
	free(lines);
	free(b.s);
	return err;
}
