/* SPDX-License-Identifier: MIT */
/* `gpubpf convert IN -o OUT [--format speedscope|folded|pprof] [--sample-type NAME]`:
 * read a pprof file and write it in another format (atomically, like record). */
#ifndef GPUBPF_CONVERT_H
#define GPUBPF_CONVERT_H

#include <stdio.h>

/* argv[0] is "convert". Returns 0 or a negative errno (after one line on stderr). */
int convert__main(int argc, char **argv);
void convert__usage(FILE *f);

#endif /* GPUBPF_CONVERT_H */
