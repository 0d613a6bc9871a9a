// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kallsyms.h"
#include "readfile.h"

/* kallsyms carries no sizes; past this distance from the nearest symbol an address is
 * more likely in a gap (unloaded module, BPF trampoline) than in that function. */
#define KSYM_MAX_SPAN (1u << 20)
/* /proc/kallsyms is ~10 MiB with many modules; refuse anything absurdly larger. */
#define KALLSYMS_MAX_BYTES (256u << 20)

struct kallsyms {
	struct ksym *syms;
	size_t n;
	char *buf; /* the file's text; names point into it */
};

static bool is_text(char t)
{
	return t == 'T' || t == 't' || t == 'W' || t == 'w';
}

int kallsyms__parse_line(const char *line, size_t len, struct kallsyms_line *out)
{
	const char *p, *end, *q;
	uint64_t v = 0;
	int n = 0;

	memset(out, 0, sizeof(*out));
	if (!line)
		return -EINVAL;
	p = line;
	end = line + len;
	if (end > p && end[-1] == '\n')
		end--;
	if (memchr(p, '\n', (size_t)(end - p)) || memchr(p, '\0', (size_t)(end - p)))
		return -EINVAL;
	for (; p < end; p++, n++) {
		int d;

		if (*p >= '0' && *p <= '9')
			d = *p - '0';
		else if (*p >= 'a' && *p <= 'f')
			d = *p - 'a' + 10;
		else if (*p >= 'A' && *p <= 'F')
			d = *p - 'A' + 10;
		else
			break;
		if (v >> 60)
			return -EINVAL;
		v = (v << 4) | (uint64_t)d;
	}
	if (!n || end - p < 4 || p[0] != ' ' || p[2] != ' ')
		return -EINVAL;
	if (!((p[1] >= 'a' && p[1] <= 'z') || (p[1] >= 'A' && p[1] <= 'Z')))
		return -EINVAL;
	out->addr = v;
	out->type = p[1];
	p += 3;
	q = p;
	while (q < end && *q != '\t' && *q != ' ')
		q++;
	if (q == p)
		return -EINVAL;
	out->name = p;
	out->name_len = (size_t)(q - p);
	if (q == end)
		return 0;
	while (q < end && (*q == '\t' || *q == ' '))
		q++;
	if (q == end)
		return 0;
	if (*q != '[' || end[-1] != ']' || end - q < 3)
		return -EINVAL;
	out->mod = q + 1;
	out->mod_len = (size_t)(end - q - 2);
	if (memchr(out->mod, ']', out->mod_len) || memchr(out->mod, '[', out->mod_len))
		return -EINVAL;
	return 0;
}

static int ksym_cmp(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* Among aliases, sort text (then global) last so the lookup lands on it. */
	if (is_text(x->type) != is_text(y->type))
		return is_text(x->type) ? 1 : -1;
	if ((x->type >= 'A' && x->type <= 'Z') != (y->type >= 'A' && y->type <= 'Z'))
		return (x->type >= 'A' && x->type <= 'Z') ? 1 : -1;
	return strcmp(x->name, y->name);
}

/* The kernel lists its own symbols in address order (modules' and BPF's after them, in
 * theirs): a full sort of its 120k lines took 17 ms of gpubpf's CPU at every write-out.
 * Where the addresses never go down, only runs of aliases need ordering among themselves. */
static void sort_syms(struct ksym *syms, size_t n)
{
	size_t i, run;

	for (i = 1; i < n; i++)
		if (syms[i].addr < syms[i - 1].addr) {
			qsort(syms, n, sizeof(*syms), ksym_cmp);
			return;
		}
	for (i = 0; i < n; i = run) {
		for (run = i + 1; run < n && syms[run].addr == syms[i].addr; run++)
			;
		if (run - i > 1)
			qsort(syms + i, run - i, sizeof(*syms), ksym_cmp);
	}
}

struct kallsyms *kallsyms__load(const char *path)
{
	size_t len = 0;
	char *buf = readfile__path(path, KALLSYMS_MAX_BYTES, false, &len);

	if (!buf)
		return NULL;
	return kallsyms__from_buf(buf, len);
}

struct kallsyms *kallsyms__from_buf(char *buf, size_t len)
{
	struct kallsyms *k;
	size_t cap = 0;
	bool nonzero = false;
	char *p, *end;
	int err;

	k = calloc(1, sizeof(*k));
	if (!k) {
		free(buf);
		return NULL;
	}
	k->buf = buf;
	end = k->buf + len;
	for (p = k->buf; p < end;) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *le = nl ? nl : end;
		struct kallsyms_line kl;

		if (!kallsyms__parse_line(p, (size_t)(le - p), &kl)) {
			if (k->n == cap) {
				struct ksym *ns;

				cap = cap ? cap * 2 : 1024;
				ns = realloc(k->syms, cap * sizeof(*ns));
				if (!ns)
					goto err_out;
				k->syms = ns;
			}
			/* Names and module names are NUL-terminated in place. */
			((char *)kl.name)[kl.name_len] = '\0';
			if (kl.mod)
				((char *)kl.mod)[kl.mod_len] = '\0';
			k->syms[k->n++] = (struct ksym){kl.addr, kl.name, kl.mod, kl.type};
			nonzero |= kl.addr != 0;
		}
		p = le + 1;
	}
	if (!nonzero) {
		errno = ENODATA;
		goto err_out;
	}
	sort_syms(k->syms, k->n);
	return k;
err_out:
	err = errno ? errno : EINVAL;
	kallsyms__free(k);
	errno = err;
	return NULL;
}

void kallsyms__free(struct kallsyms *k)
{
	if (!k)
		return;
	free(k->syms);
	free(k->buf);
	free(k);
}

size_t kallsyms__count(const struct kallsyms *k)
{
	return k ? k->n : 0;
}

const struct ksym *kallsyms__lookup(const struct kallsyms *k, uint64_t addr)
{
	size_t lo = 0, hi;
	const struct ksym *s;

	if (!k || !k->n)
		return NULL;
	hi = k->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (k->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	s = &k->syms[lo - 1];
	if (!is_text(s->type) || addr - s->addr >= KSYM_MAX_SPAN)
		return NULL;
	return s;
}

const struct ksym *kallsyms__find(const struct kallsyms *k, const char *name)
{
	if (!k)
		return NULL;
	for (size_t i = 0; i < k->n; i++)
		if (!strcmp(k->syms[i].name, name))
			return &k->syms[i];
	return NULL;
}
