// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent_cut.h"
#include "pprof.h"

struct by_pid {
	int pid;
	size_t idx;
};

static int cmp_by_pid(const void *a, const void *b)
{
	const struct by_pid *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

int agent_cut__group(const struct profile *p, struct cut_set *cs)
{
	size_t n = profile__num_samples(p), np = 0;
	struct by_pid *v;

	memset(cs, 0, sizeof(*cs));
	if (!n)
		return 0;
	v = malloc(n * sizeof(*v));
	cs->idx = malloc(n * sizeof(*cs->idx));
	cs->pids = malloc(n * sizeof(*cs->pids));
	cs->start = malloc((n + 1) * sizeof(*cs->start));
	if (!v || !cs->idx || !cs->pids || !cs->start) {
		free(v);
		agent_cut__set_free(cs);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		v[i] = (struct by_pid){.pid = profile__sample(p, i)->pid, .idx = i};
	qsort(v, n, sizeof(*v), cmp_by_pid);
	for (size_t i = 0; i < n; i++) {
		if (i == 0 || v[i].pid != v[i - 1].pid) {
			cs->pids[np] = v[i].pid;
			cs->start[np++] = i;
		}
		cs->idx[i] = v[i].idx;
	}
	cs->start[np] = n;
	cs->npids = np;
	free(v);
	return 0;
}

void agent_cut__set_free(struct cut_set *cs)
{
	free(cs->pids);
	free(cs->idx);
	free(cs->start);
	memset(cs, 0, sizeof(*cs));
}

static int copy_types(struct profile *dst, const struct profile *src)
{
	const char *pt, *pu;
	int64_t period;

	for (int i = 0; i < profile__num_types(src); i++) {
		const char *t, *u;
		int r;

		profile__type(src, i, &t, &u);
		r = profile__add_type(dst, t, u);
		if (r != i)
			return r < 0 ? r : -EINVAL;
	}
	profile__period(src, &pt, &pu, &period);
	return pt ? profile__set_period(dst, pt, pu, period) : 0;
}

struct profile *agent_cut__renew(const struct profile *src)
{
	struct profile *p = profile__new();
	int err;

	if (!p)
		return NULL;
	err = copy_types(p, src);
	if (err) {
		profile__free(p);
		errno = -err;
		return NULL;
	}
	return p;
}

/* The location SRC_ID of SRC in DST (added at its first use). */
static int map_loc(struct profile *dst, const struct profile *src, uint32_t *map, uint32_t src_id, uint32_t *out)
{
	const struct prof_location *l = profile__location(src, src_id);
	struct sym_result fallback;
	const struct sym_result *r;
	int err;

	if (!l)
		return -ENOENT;
	if (map[src_id]) {
		*out = map[src_id];
		return 0;
	}
	r = &l->sym;
	if (!l->symbolized || l->sym.nframes < 1) {
		/* not symbolized (a resolver ran out of memory): the address says what it can */
		memset(&fallback, 0, sizeof(fallback));
		fallback.nframes = 1;
		r = &fallback;
	}
	err = profile__add_resolved_location(dst, l->kind, l->pid, l->addr, r, &map[src_id]);
	*out = map[src_id];
	return err;
}

static int build(struct profile *dst, const struct profile *src, const size_t *idx, size_t n, uint32_t *map)
{
	uint32_t locs[PROFILE_MAX_FRAMES];
	int err = 0;

	for (size_t i = 0; i < n && !err; i++) {
		const struct prof_sample *s = profile__sample(src, idx[i]);
		struct prof_label keep[PROFILE_MAX_LABELS];
		int nk = 0;

		if (!s || s->nlocs > PROFILE_MAX_FRAMES)
			return -EINVAL;
		for (uint32_t j = 0; j < s->nlocs && !err; j++)
			err = map_loc(dst, src, map, s->locs[j], &locs[j]);
		for (uint32_t j = 0; j < s->nlabels; j++)
			if (!strcmp(s->labels[j].key, "thread_name"))
				keep[nk++] = s->labels[j];
		/* threads of one name are one sample: tid is not a label here */
		if (!err)
			err = profile__add_sample_locs(dst, s->pid, 0, locs, (int)s->nlocs, keep, nk, s->values);
	}
	return err;
}

int agent_cut__pprof(const struct profile *src, const size_t *idx, size_t n, const struct cut_meta *m, char **buf,
		     size_t *len)
{
	struct profile *dst = agent_cut__renew(src);
	uint32_t *map = calloc(profile__num_locations(src) + 1, sizeof(*map));
	FILE *f = NULL;
	int err;

	*buf = NULL;
	*len = 0;
	if (!dst || !map) {
		err = -ENOMEM;
		goto out;
	}
	profile__set_time(dst, m->time_ns, m->duration_ns);
	for (int i = 0; i < m->ncomments; i++) {
		err = profile__add_comment(dst, "%s", m->comments[i]);
		if (err)
			goto out;
	}
	err = build(dst, src, idx, n, map);
	if (err)
		goto out;
	f = open_memstream(buf, len);
	if (!f) {
		err = -errno;
		goto out;
	}
	/* zlib's fastest level: most of the encoding's CPU is deflate (pprof.h) */
	err = pprof__write_level(dst, f, 1);
	if (fclose(f) && !err)
		err = -EIO;
	if (err) {
		free(*buf);
		*buf = NULL;
		*len = 0;
	}
out:
	free(map);
	profile__free(dst);
	return err;
}
