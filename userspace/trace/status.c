// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <unistd.h>

#include "status.h"

void status__init(struct status *st, const char *what)
{
	st->tty = isatty(STDERR_FILENO);
	st->shown = false;
	st->what = what;
}

void status__update(struct status *st, double elapsed, int targets, uint64_t samples, uint64_t lost, const char *extra)
{
	if (!st->tty)
		return;
	fprintf(stderr, "\r\033[Kgpubpf: recording %s  %.0fs  targets %d  samples %llu  lost %llu%s  (Ctrl-C to stop)",
		st->what, elapsed, targets, (unsigned long long)samples, (unsigned long long)lost, extra ? extra : "");
	fflush(stderr);
	st->shown = true;
}

void status__clear(struct status *st)
{
	if (st->tty && st->shown)
		fputs("\r\033[K", stderr);
	st->shown = false;
}
