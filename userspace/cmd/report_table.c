// SPDX-License-Identifier: MIT
/* gpubpf report: tables (rows by name and call site, columns of values, shares and
 * averages) and their aligned printing, raw or in units. */
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

void rep_table_free(struct table *t)
{
	free(t->rows);
	hmap__clear(&t->idx);
	memset(t, 0, sizeof(*t));
}

/* The row of (name, file, line), created empty; names are the model's interned strings,
 * so a pointer is an identity. NULL on -ENOMEM. */
struct row *rep_table_get(struct table *t, const char *name, const char *file, int line)
{
	uint64_t v;

	if (hmap__get(&t->idx, (uintptr_t)name, (uintptr_t)file, (uint64_t)(uint32_t)line, &v))
		return &t->rows[v];
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 32;
		struct row *n = realloc(t->rows, cap * sizeof(*n));

		if (!n)
			return NULL;
		t->rows = n;
		t->cap = cap;
	}
	memset(&t->rows[t->n], 0, sizeof(t->rows[t->n]));
	t->rows[t->n].name = name;
	t->rows[t->n].file = file;
	t->rows[t->n].line = line;
	if (hmap__put(&t->idx, (uintptr_t)name, (uintptr_t)file, (uint64_t)(uint32_t)line, t->n))
		return NULL;
	return &t->rows[t->n++];
}

/* qsort has no context argument; report runs on one thread */
static int sort_col;
int rep_sort_col2 = -1; /* a second sort column, or -1 (sec_functions sets it) */

static int cmp_row(const void *pa, const void *pb)
{
	const struct row *a = pa, *b = pb;
	int c;

	if (a->v[sort_col] != b->v[sort_col])
		return a->v[sort_col] > b->v[sort_col] ? -1 : 1;
	if (rep_sort_col2 >= 0 && a->v[rep_sort_col2] != b->v[rep_sort_col2])
		return a->v[rep_sort_col2] > b->v[rep_sort_col2] ? -1 : 1;
	c = strcmp(a->name, b->name);
	if (c)
		return c;
	c = strcmp(a->file ? a->file : "", b->file ? b->file : "");
	if (c)
		return c;
	return (a->line > b->line) - (a->line < b->line);
}

/* ---- formatting ---- */

void rep_fmt_val(char *buf, size_t len, int64_t v, enum unit u, bool raw)
{
	double d = (double)v;

	if (raw || u == U_COUNT) {
		snprintf(buf, len, "%" PRId64, v);
	} else if (u == U_NS) {
		if (v < 1000 && v > -1000)
			snprintf(buf, len, "%" PRId64 " ns", v);
		else if (v < 1000000 && v > -1000000)
			snprintf(buf, len, "%.2f us", d / 1e3);
		else if (v < 1000000000 && v > -1000000000)
			snprintf(buf, len, "%.2f ms", d / 1e6);
		else
			snprintf(buf, len, "%.3f s", d / 1e9);
	} else {
		if (v < 1024 && v > -1024)
			snprintf(buf, len, "%" PRId64 " B", v);
		else if (v < (1 << 20) && v > -(1 << 20))
			snprintf(buf, len, "%.2f KiB", d / 1024);
		else if (v < (1LL << 30) && v > -(1LL << 30))
			snprintf(buf, len, "%.2f MiB", d / (1 << 20));
		else
			snprintf(buf, len, "%.2f GiB", d / (1LL << 30));
	}
}

/* Sums of absurd values (another tool's INT64_MAX) stop at the bounds and are counted,
 * rather than wrapping to a negative number nobody would question. */
uint64_t rep_n_saturated; /* sums that stopped at INT64_MAX in this report */

void rep_sat_add(int64_t *a, int64_t b)
{
	if (__builtin_add_overflow(*a, b, a)) {
		*a = b > 0 ? INT64_MAX : INT64_MIN;
		rep_n_saturated++;
	}
}

/* Print rows sorted by column sort_by, the first `top` of them, then one "[N more]" row
 * summing the rest, so additive columns (and their percentages) still add up to the
 * totals. The name column is last: long C++ names do not push the numbers apart. */
void rep_print_table(FILE *f, struct table *t, const struct col *cols, int ncols, int sort_by, int top, bool raw,
		     const char *name_title, int64_t grand)
{
	int64_t tot[NV] = {0};
	size_t nshow = t->n, nrows;
	struct row more = {0};
	char(*cells)[CELL];
	int w[16] = {0};
	char morename[48];

	sort_col = sort_by;
	if (t->n > 1)
		qsort(t->rows, t->n, sizeof(*t->rows), cmp_row);
	for (size_t i = 0; i < t->n; i++)
		for (int k = 0; k < NV; k++)
			rep_sat_add(&tot[k], t->rows[i].v[k]);
	if (top > 0 && t->n > (size_t)top + 1) {
		nshow = top;
		for (size_t i = nshow; i < t->n; i++)
			for (int k = 0; k < NV; k++)
				rep_sat_add(&more.v[k], t->rows[i].v[k]);
		snprintf(morename, sizeof(morename), "[%zu more]", t->n - nshow);
		more.name = morename;
	}
	nrows = nshow + (more.name ? 1 : 0);
	cells = calloc((nrows + 1) * ncols, CELL);
	if (!cells)
		return;
	for (int c = 0; c < ncols; c++) {
		snprintf(cells[c], CELL, "%s", cols[c].title);
		w[c] = (int)strlen(cells[c]);
	}
	for (size_t r = 0; r < nrows; r++) {
		const struct row *row = r < nshow ? &t->rows[r] : &more;

		for (int c = 0; c < ncols; c++) {
			const struct col *cl = &cols[c];
			char *cell = cells[(r + 1) * ncols + c];

			if (row == &more && !cl->additive) {
				cell[0] = '\0';
			} else if (cl->kind == COL_VAL) {
				rep_fmt_val(cell, CELL, row->v[cl->a], cl->unit, raw);
			} else if (cl->kind == COL_PCT || cl->kind == COL_PCTG) {
				int64_t d = cl->kind == COL_PCT ? tot[cl->a] : grand;

				if (d)
					snprintf(cell, CELL, "%.1f%%", 100.0 * (double)row->v[cl->a] / (double)d);
				else
					snprintf(cell, CELL, "-");
			} else if (row->v[cl->b] && row->v[cl->a]) {
				rep_fmt_val(cell, CELL, row->v[cl->a] / row->v[cl->b], cl->unit, raw);
			} else {
				snprintf(cell, CELL, "-");
			}
			if ((int)strlen(cell) > w[c])
				w[c] = (int)strlen(cell);
		}
	}
	for (size_t r = 0; r < nrows + 1; r++) {
		const struct row *row = r == 0 ? NULL : r - 1 < nshow ? &t->rows[r - 1] : &more;

		fputs(" ", f);
		for (int c = 0; c < ncols; c++)
			fprintf(f, " %*s", w[c], cells[r * ncols + c]);
		if (!row) {
			fprintf(f, "  %s\n", name_title);
			continue;
		}
		fprintf(f, "  %s", row->name);
		if (row->file)
			fprintf(f, " (%s:%d)", row->file, row->line);
		fputc('\n', f);
	}
	free(cells);
}
