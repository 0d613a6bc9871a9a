/* SPDX-License-Identifier: MIT */
/* /proc/kallsyms: a line parser (fuzzed) and a sorted, binary-searched table. */
#ifndef GPUBPF_KALLSYMS_H
#define GPUBPF_KALLSYMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kallsyms_line {
	uint64_t addr;
	char type;	  /* 'T', 't', 'D', ... */
	const char *name; /* points into the line, not NUL-terminated */
	size_t name_len;
	const char *mod; /* module name without brackets, or NULL */
	size_t mod_len;
};

/* Parse "ADDR TYPE NAME[\t[MODULE]]" from LINE[0..LEN). Returns 0 or -EINVAL. */
int kallsyms__parse_line(const char *line, size_t len, struct kallsyms_line *out);

struct ksym {
	uint64_t addr;
	const char *name;
	const char *mod; /* NULL for the core kernel */
	char type;
};

struct kallsyms;

/* Load and sort a kallsyms file. NULL with errno set on failure; errno ENODATA when every
 * address reads as zero (kptr_restrict, or not root): such a table cannot symbolize. */
struct kallsyms *kallsyms__load(const char *path);
/* The same from BUF[0..LEN), which must be malloc'd with BUF[LEN] == '\0'; takes
 * ownership of BUF, also on failure. */
struct kallsyms *kallsyms__from_buf(char *buf, size_t len);
void kallsyms__free(struct kallsyms *k);
size_t kallsyms__count(const struct kallsyms *k);

/* The text symbol containing ADDR, or NULL when ADDR precedes every symbol, falls on a
 * non-text symbol, or lies implausibly far past the nearest one. */
const struct ksym *kallsyms__lookup(const struct kallsyms *k, uint64_t addr);

/* First symbol named NAME, or NULL. Linear: meant for tests and one-off lookups. */
const struct ksym *kallsyms__find(const struct kallsyms *k, const char *name);

#endif /* GPUBPF_KALLSYMS_H */
