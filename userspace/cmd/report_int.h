/* SPDX-License-Identifier: MIT */
/* gpubpf report's insides, shared by its files: report.c (the sections of a profile,
 * the command), report_table.c (tables: rows, columns, aligned printing),
 * report_trace.c (duration statistics of a trace). report.h is the contract. */
#ifndef GPUBPF_REPORT_INT_H
#define GPUBPF_REPORT_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "hmap.h"
#include "report.h"

#define NV 6 /* values per row */

enum unit { U_COUNT, U_NS, U_BYTES };

struct row {
	const char *name, *file; /* file: a call site's source file, or NULL */
	int line;
	int64_t v[NV];
};

struct table {
	struct row *rows;
	size_t n, cap;
	struct hmap idx; /* (name ptr, file ptr, line) -> row index */
};

enum col_kind {
	COL_VAL,  /* v[a] */
	COL_PCT,  /* v[a] as a share of the column's total */
	COL_AVG,  /* v[a] / v[b] */
	COL_PCTG, /* v[a] as a share of the grand total given to print_table */
};

struct col {
	const char *title;
	enum col_kind kind;
	int a, b;
	enum unit unit;
	bool additive; /* false: left blank on the "[N more]" row (cumulative values) */
};

/* ---- report.c ---- */

void rep_section(FILE *f, const char *title);

/* ---- report_table.c ---- */

#define CELL 48 /* bytes of a printed cell */
extern int rep_sort_col2;
extern uint64_t rep_n_saturated;

void rep_table_free(struct table *t);
struct row *rep_table_get(struct table *t, const char *name, const char *file, int line);
void rep_fmt_val(char *buf, size_t len, int64_t v, enum unit u, bool raw);
void rep_sat_add(int64_t *a, int64_t b);
void rep_print_table(FILE *f, struct table *t, const struct col *cols, int ncols, int sort_by, int top, bool raw,
		     const char *name_title, int64_t grand);

#endif /* GPUBPF_REPORT_INT_H */
