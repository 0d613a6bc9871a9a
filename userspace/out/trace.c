// SPDX-License-Identifier: MIT
/* Chrome trace-event JSON: writer, reader (jansson) and validator. See trace.h. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "pprof_read.h"
#include "trace.h"

#include "trace_int.h"

#include "version.h" /* GPUBPF_VERSION, generated (Makefile) */

/* Device tracks get thread ids no kernel hands out (pid_max is at most 2^22), so they
 * never collide with a real thread of the same process. */
#define DEVICE_TID_BASE 0x40000000

/* ---- JSON strings ---- */

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if it is not one. */
static int utf8_len(const unsigned char *s)
{
	uint32_t cp;
	int n;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0; /* also stops at the terminating NUL */
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* overlong forms, UTF-16 surrogates and code points past U+10FFFF are invalid */
	if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

int json__write_str(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");

	putc('"', f);
	while (*s) {
		int n = utf8_len(s);

		if (!n) {
			fputs("\\ufffd", f);
			s++;
			continue;
		}
		if (n > 1) {
			fwrite(s, 1, n, f);
			s += n;
			continue;
		}
		switch (*s) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		default:
			if (*s < 0x20)
				fprintf(f, "\\u%04x", *s);
			else
				putc(*s, f);
		}
		s++;
	}
	putc('"', f);
	return ferror(f) ? -EIO : 0;
}

/* ---- the event list ---- */

struct trace *trace__new(void)
{
	struct trace *t = calloc(1, sizeof(*t));

	if (!t)
		errno = ENOMEM;
	return t;
}

static void ev_free(struct trace_event *e)
{
	free((char *)e->name);
	free((char *)e->process_name);
	free((char *)e->thread_name);
}

void trace__free(struct trace *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		ev_free(&t->ev[i]);
	free(t->ev);
	free(t->calls);
	free(t);
}

int trace__add(struct trace *t, const struct trace_event *ev)
{
	struct trace_event *e;

	if (!t || !ev || !ev->name || ev->kind < TRACE_API || ev->kind > TRACE_LAUNCH)
		return -EINVAL;
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 256;
		struct trace_event *n = realloc(t->ev, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		t->ev = n;
		t->cap = cap;
	}
	e = &t->ev[t->n];
	*e = *ev;
	e->name = strdup(ev->name);
	e->process_name = ev->process_name ? strdup(ev->process_name) : NULL;
	e->thread_name = ev->thread_name ? strdup(ev->thread_name) : NULL;
	if (!e->name || (ev->process_name && !e->process_name) || (ev->thread_name && !e->thread_name)) {
		ev_free(e);
		return -ENOMEM;
	}
	t->n++;
	return 0;
}

size_t trace__num_events(const struct trace *t)
{
	return t ? t->n : 0;
}

const struct trace_event *trace__event(const struct trace *t, size_t idx)
{
	return t && idx < t->n ? &t->ev[idx] : NULL;
}

/* ---- finding a call ---- */

static const struct trace *sort_t; /* qsort has no context argument */

static int cmp_call(int pid, int tid, uint64_t start, const struct trace_event *b)
{
	if (pid != b->pid)
		return pid < b->pid ? -1 : 1;
	if (tid != b->tid)
		return tid < b->tid ? -1 : 1;
	return start < b->start_ns ? -1 : start > b->start_ns ? 1 : 0;
}

static int cmp_idx(const void *a, const void *b)
{
	const struct trace_event *x = &sort_t->ev[*(const size_t *)a], *y = &sort_t->ev[*(const size_t *)b];
	int c = cmp_call(x->pid, x->tid, x->start_ns, y);

	if (c)
		return c;
	/* the same start: the longer (outer) call first, so the inner one is found first */
	return x->dur_ns > y->dur_ns ? -1 : x->dur_ns < y->dur_ns ? 1 : 0;
}

static int index_calls(struct trace *t)
{
	size_t *calls = realloc(t->calls, (t->n ? t->n : 1) * sizeof(*calls));

	if (!calls)
		return -ENOMEM;
	t->calls = calls;
	t->ncalls = 0;
	for (size_t i = 0; i < t->n; i++)
		if (t->ev[i].kind == TRACE_API)
			t->calls[t->ncalls++] = i;
	sort_t = t;
	qsort(t->calls, t->ncalls, sizeof(*t->calls), cmp_idx);
	sort_t = NULL;
	t->n_indexed = t->n;
	return 0;
}

/* The first call of (PID, TID) in T's index that starts after TS (T->ncalls: none). */
static size_t first_after(const struct trace *t, int pid, int tid, uint64_t ts)
{
	size_t lo = 0, hi = t->ncalls;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (cmp_call(pid, tid, ts, &t->ev[t->calls[mid]]) >= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

long trace__find_call(struct trace *t, int pid, int tid, uint64_t ts)
{
	size_t lo;

	if (!t || (t->n_indexed != t->n && index_calls(t)))
		return -1;
	lo = first_after(t, pid, tid, ts);
	/* back from there: the latest-starting call that still holds ts is the innermost;
	 * calls nest, so a few steps back suffice */
	for (size_t i = lo, steps = 0; i-- > 0 && steps < 64; steps++) {
		const struct trace_event *e = &t->ev[t->calls[i]];

		if (e->pid != pid || e->tid != tid)
			break;
		if (e->start_ns <= ts && ts <= e->start_ns + e->dur_ns)
			return (long)t->calls[i];
	}
	return -1;
}

long trace__find_call_after(struct trace *t, int pid, int tid, uint64_t after, uint64_t before, const char *prefix)
{
	size_t lo;

	if (!t || (t->n_indexed != t->n && index_calls(t)))
		return -1;
	lo = first_after(t, pid, tid, after);
	for (size_t i = lo, steps = 0; i < t->ncalls && steps < 64; i++, steps++) {
		const struct trace_event *e = &t->ev[t->calls[i]];

		if (e->pid != pid || e->tid != tid || e->start_ns >= before)
			break;
		if (!e->correlation && (!prefix || !strncmp(e->name, prefix, strlen(prefix))))
			return (long)t->calls[i];
	}
	return -1;
}

void trace__set_correlation(struct trace *t, size_t idx, uint64_t corr)
{
	if (t && idx < t->n)
		t->ev[idx].correlation = corr;
}

/* ---- writer ---- */

struct track {
	int pid, tid;
	bool device;
	uint32_t dev;
	uint64_t stream;
	const char *name; /* thread name, or NULL */
	uint64_t *ends;	  /* end times of the open slices, innermost last */
	size_t nends, capends;
};

struct writer {
	struct trace *t;
	struct hmap procs;  /* (pid) -> process name or 0 */
	struct hmap tracks; /* (kind, pid/tid or pid|dev, stream) -> track index */
	struct track *tr;
	size_t ntr, captr;
	size_t ndev; /* device tracks so far, for their thread ids */
};

static int cmp_ev(const void *a, const void *b)
{
	const struct trace_event *x = *(const struct trace_event *const *)a, *y = *(const struct trace_event *const *)b;

	if (x->start_ns != y->start_ns)
		return x->start_ns < y->start_ns ? -1 : 1;
	/* the enclosing slice first, so a nested one finds it open */
	if (x->dur_ns != y->dur_ns)
		return x->dur_ns > y->dur_ns ? -1 : 1;
	return x < y ? -1 : x > y;
}

static bool on_device(const struct trace_event *e)
{
	return e->kind == TRACE_KERNEL || e->kind == TRACE_MEMCPY;
}

static int track_of(struct writer *w, const struct trace_event *e, size_t *idx)
{
	bool dev = on_device(e);
	uint64_t a = dev ? 3 : 2, b, c, v;
	struct track *t;
	int err;

	b = dev ? (uint64_t)(uint32_t)e->pid << 32 | e->device : (uint64_t)(uint32_t)e->pid;
	c = dev ? e->stream : (uint64_t)(uint32_t)e->tid;
	if (hmap__get(&w->tracks, a, b, c, &v)) {
		*idx = v;
		t = &w->tr[v];
		if (!t->name && !dev && e->thread_name)
			t->name = e->thread_name;
		return 0;
	}
	if (w->ntr == w->captr) {
		size_t cap = w->captr ? w->captr * 2 : 16;
		struct track *n = realloc(w->tr, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		w->tr = n;
		w->captr = cap;
	}
	t = &w->tr[w->ntr];
	memset(t, 0, sizeof(*t));
	t->pid = e->pid;
	t->device = dev;
	t->dev = e->device;
	t->stream = e->stream;
	t->tid = dev ? DEVICE_TID_BASE + (int)w->ndev++ : e->tid;
	t->name = dev ? NULL : e->thread_name;
	err = hmap__put(&w->tracks, a, b, c, w->ntr);
	if (err)
		return err;
	*idx = w->ntr++;
	return 0;
}

static void put_us(FILE *f, uint64_t ns)
{
	fprintf(f, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

/* Clip e's duration so it nests in the slices open on its track; returns the duration. */
static int nest(struct track *t, const struct trace_event *e, uint64_t *dur)
{
	uint64_t end = e->start_ns + e->dur_ns;

	while (t->nends && t->ends[t->nends - 1] <= e->start_ns)
		t->nends--;
	/* slices on a track must nest (Perfetto flags partial overlap as an error): a
	 * partial overlap, possible with clocks read on different CPUs, is cut at the end
	 * of the enclosing slice */
	if (t->nends && end > t->ends[t->nends - 1])
		end = t->ends[t->nends - 1];
	if (t->nends == t->capends) {
		size_t cap = t->capends ? t->capends * 2 : 8;
		uint64_t *n = realloc(t->ends, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		t->ends = n;
		t->capends = cap;
	}
	t->ends[t->nends++] = end;
	*dur = end - e->start_ns;
	return 0;
}

static const char *cat_of(enum trace_kind k)
{
	return k == TRACE_API	   ? "cuda_api"
	       : k == TRACE_KERNEL ? "kernel"
	       : k == TRACE_MEMCPY ? "memcpy"
				   : "cuda_launch";
}

static void write_meta(struct writer *w, FILE *f, bool *first)
{
	char buf[96];

	hmap_for_each(&w->procs, e)
	{
		fprintf(f, "%s\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":",
			*first ? "" : ",", (int)e->k[0]);
		*first = false;
		if (e->val) {
			json__write_str(f, (const char *)(uintptr_t)e->val);
		} else {
			snprintf(buf, sizeof(buf), "pid %d", (int)e->k[0]);
			json__write_str(f, buf);
		}
		fputs("}}", f);
	}
	for (size_t i = 0; i < w->ntr; i++) {
		const struct track *t = &w->tr[i];

		if (t->device)
			snprintf(buf, sizeof(buf), "GPU %u stream 0x%" PRIx64, t->dev, t->stream);
		fprintf(f, "%s\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":",
			*first ? "" : ",", t->pid, t->tid);
		*first = false;
		if (t->device || !t->name) {
			if (!t->device)
				snprintf(buf, sizeof(buf), "thread %d", t->tid);
			json__write_str(f, buf);
		} else {
			json__write_str(f, t->name);
		}
		fputs("}}", f);
		/* GPU tracks below the process's CPU threads */
		if (t->device)
			fprintf(f,
				",\n{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,"
				"\"args\":{\"sort_index\":%d}}",
				t->pid, t->tid, t->tid);
	}
}

static void write_flow(FILE *f, const struct trace_event *e, const struct track *t, char ph, uint64_t dur)
{
	/* a flow point binds to the slice enclosing it: the middle of the slice is safely
	 * inside it, even at a zero-length edge */
	fprintf(f,
		",\n{\"ph\":\"%c\",\"cat\":\"launch\",\"name\":\"launch\",\"id\":\"%" PRIu64
		"\",\"pid\":%d,\"tid\":%d,\"ts\":",
		ph, e->correlation, t->pid, t->tid);
	put_us(f, e->start_ns + dur / 2);
	fputs(ph == 'f' ? ",\"bp\":\"e\"}" : "}", f);
}

int trace__write(struct trace *t, FILE *f)
{
	struct writer w = {.t = t};
	const struct trace_event **ord = NULL;
	struct hmap corr = {0}; /* correlation id -> index in ord + 1 of the API call */
	size_t *trk = NULL;
	uint64_t *durs = NULL;
	bool first = true;
	int err = 0;

	if (!t || !f)
		return -EINVAL;
	if (t->n) {
		ord = calloc(t->n, sizeof(*ord));
		trk = calloc(t->n, sizeof(*trk));
		durs = calloc(t->n, sizeof(*durs));
		if (!ord || !trk || !durs) {
			err = -ENOMEM;
			goto out;
		}
	}
	for (size_t i = 0; i < t->n; i++)
		ord[i] = &t->ev[i];
	if (t->n > 1)
		qsort(ord, t->n, sizeof(*ord), cmp_ev);
	for (size_t i = 0; i < t->n && !err; i++) {
		const struct trace_event *e = ord[i];
		uint64_t v;

		if (!hmap__get(&w.procs, (uint32_t)e->pid, 0, 0, &v) || (!v && e->process_name))
			err = hmap__put(&w.procs, (uint32_t)e->pid, 0, 0, (uintptr_t)e->process_name);
		if (!err)
			err = track_of(&w, e, &trk[i]);
		if (!err)
			err = nest(&w.tr[trk[i]], e, &durs[i]);
		if (!err && !on_device(e) && e->correlation && !hmap__get(&corr, e->correlation, 0, 0, NULL))
			err = hmap__put(&corr, e->correlation, 0, 0, i + 1);
	}
	if (err)
		goto out;

	fprintf(f, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"gpubpf %s\"},\n\"traceEvents\":[",
		GPUBPF_VERSION);
	write_meta(&w, f, &first);
	for (size_t i = 0; i < t->n; i++) {
		const struct trace_event *e = ord[i];
		const struct track *tr = &w.tr[trk[i]];

		fprintf(f, "%s\n{\"ph\":\"X\",\"cat\":\"%s\",\"name\":", first ? "" : ",", cat_of(e->kind));
		first = false;
		json__write_str(f, e->name);
		fprintf(f, ",\"pid\":%d,\"tid\":%d,\"ts\":", tr->pid, tr->tid);
		put_us(f, e->start_ns);
		fputs(",\"dur\":", f);
		put_us(f, durs[i]);
		fputs(",\"args\":{", f);
		if (on_device(e))
			fprintf(f, "\"device\":%u,\"stream\":\"0x%" PRIx64 "\"%s", e->device, e->stream,
				e->kind == TRACE_MEMCPY || e->correlation ? "," : "");
		if (e->kind == TRACE_MEMCPY)
			fprintf(f, "\"bytes\":%" PRIu64 "%s", e->bytes, e->correlation ? "," : "");
		/* as a string: pid << 32 | id passes 2^53 (JavaScript's exact integers) for
		 * pids past 2,097,152 */
		if (e->correlation)
			fprintf(f, "\"correlation\":\"%" PRIu64 "\"", e->correlation);
		fputs("}}", f);
	}
	/* flows after the slices: a launch call to the kernel (or copy) it started */
	for (size_t i = 0; i < t->n; i++) {
		const struct trace_event *e = ord[i];
		uint64_t a;

		if (!on_device(e) || !e->correlation || !hmap__get(&corr, e->correlation, 0, 0, &a) || !a)
			continue;
		write_flow(f, ord[a - 1], &w.tr[trk[a - 1]], 's', durs[a - 1]);
		write_flow(f, e, &w.tr[trk[i]], 'f', durs[i]);
		/* one arrow per correlation id: the id is used up (the entry exists already,
		 * so replacing its value cannot fail) */
		hmap__put(&corr, e->correlation, 0, 0, 0);
	}
	fputs("\n]}\n", f);
	if (fflush(f) != 0 || ferror(f))
		err = -EIO;
out:
	for (size_t i = 0; i < w.ntr; i++)
		free(w.tr[i].ends);
	free(w.tr);
	hmap__clear(&w.procs);
	hmap__clear(&w.tracks);
	hmap__clear(&corr);
	free(ord);
	free(trk);
	free(durs);
	return err;
}
