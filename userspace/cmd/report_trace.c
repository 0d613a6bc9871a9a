// SPDX-License-Identifier: MIT
/* gpubpf report on a trace (--trace's Chrome trace JSON): duration statistics per
 * name of CUDA calls, kernels and copies. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "hmap.h"
#include "log.h"
#include "report.h"
#include "ttyesc.h"

#include "report_int.h"

/* ---- traces: duration statistics per name ---- */

static int cmp_tev(const void *pa, const void *pb)
{
	const struct trace_event *a = *(const struct trace_event *const *)pa,
				 *b = *(const struct trace_event *const *)pb;
	int c;

	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	c = strcmp(a->name, b->name);
	if (c)
		return c;
	return (a->dur_ns > b->dur_ns) - (a->dur_ns < b->dur_ns);
}

/* Rows of one kind: v = count, total, min, median, max, bytes. */
static int trace_rows(const struct trace_event **ev, size_t n, enum trace_kind kind, struct table *t)
{
	for (size_t i = 0; i < n;) {
		size_t j = i;
		struct row *r;

		if (ev[i]->kind != kind) {
			i++;
			continue;
		}
		while (j < n && ev[j]->kind == kind && !strcmp(ev[j]->name, ev[i]->name))
			j++;
		/* one row per name: the group's first name pointer is its identity */
		r = rep_table_get(t, ev[i]->name, NULL, 0);
		if (!r)
			return -ENOMEM;
		r->v[0] = (int64_t)(j - i);
		for (size_t k = i; k < j; k++) {
			rep_sat_add(&r->v[1], (int64_t)ev[k]->dur_ns);
			rep_sat_add(&r->v[5], (int64_t)ev[k]->bytes);
		}
		/* sorted by duration within the group */
		r->v[2] = (int64_t)ev[i]->dur_ns;
		r->v[4] = (int64_t)ev[j - 1]->dur_ns;
		r->v[3] = (j - i) % 2 ? (int64_t)ev[i + (j - i) / 2]->dur_ns
				      : (int64_t)((ev[i + (j - i) / 2 - 1]->dur_ns + ev[i + (j - i) / 2]->dur_ns) / 2);
		i = j;
	}
	return 0;
}

int report__trace(const struct trace *tr, const struct report_opts *o, FILE *f)
{
	static const struct col cols[] = {
	    {"count", COL_VAL, 0, 0, U_COUNT, true},  {"total", COL_VAL, 1, 0, U_NS, true},
	    {"total%", COL_PCT, 1, 0, U_COUNT, true}, {"min", COL_VAL, 2, 0, U_NS, false},
	    {"median", COL_VAL, 3, 0, U_NS, false},   {"max", COL_VAL, 4, 0, U_NS, false},
	    {"bytes", COL_VAL, 5, 0, U_BYTES, true},
	};
	static const struct {
		enum trace_kind kind;
		const char *title, *what, *none;
	} secs[] = {
	    {TRACE_API, "CUDA API calls (wall time on the calling thread)", "function",
	     "no CUDA API calls in the trace"},
	    {TRACE_KERNEL, "GPU kernels (device time)", "kernel",
	     "no kernels in the trace (device activity needs the injection library)"},
	    {TRACE_MEMCPY, "Memory operations (device time)", "operation", "no copies or memsets in the trace"},
	};
	struct report_opts dflt = {.top = 10};
	size_t n = trace__num_events(tr);
	const struct trace_event **ev;
	int err = 0;

	if (!tr || !f)
		return -EINVAL;
	if (!o)
		o = &dflt;
	ev = calloc(n ? n : 1, sizeof(*ev));
	if (!ev)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		ev[i] = trace__event(tr, i);
	if (n > 1)
		qsort(ev, n, sizeof(*ev), cmp_tev);
	fprintf(f, "gpubpf report of %s: trace, %zu events\n", o->source ? o->source : "a trace", n);
	for (size_t s = 0; s < sizeof(secs) / sizeof(secs[0]) && !err; s++) {
		struct table t = {0};

		err = trace_rows(ev, n, secs[s].kind, &t);
		if (!err && !t.n)
			fprintf(f, "\n%s: left out: %s\n", secs[s].title, secs[s].none);
		else if (!err) {
			rep_section(f, secs[s].title);
			rep_print_table(f, &t, cols, secs[s].kind == TRACE_MEMCPY ? 7 : 6, 1, o->top, o->raw,
					secs[s].what, 0);
		}
		rep_table_free(&t);
	}
	free(ev);
	if (!err && (fflush(f) != 0 || ferror(f)))
		err = -EIO;
	return err;
}
