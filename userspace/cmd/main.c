// SPDX-License-Identifier: MIT
/* gpubpf: command dispatch. */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "cli.h"
#include "convert.h"
#include "log.h"
#include "record.h"
#include "report.h"
#include "version.h" /* GPUBPF_VERSION, generated (Makefile) */

int main(int argc, char **argv)
{
	int err;

	/* Keep large allocations in the heap and freed memory mapped: start-up reads the
	 * kernel's BTF (5 MB) twice, kallsyms and DWARF into big buffers, and with glibc's
	 * defaults each came from fresh mmap'd pages, so every one of them page-faulted
	 * anew (~90 ms of CPU at start-up in this VM; peak RSS unchanged). */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 128 << 20);
	if (argc < 2) {
		cli__usage_main(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("gpubpf %s\n", GPUBPF_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		cli__usage_main(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "help")) {
		if (argc < 3) {
			cli__usage_main(stdout);
			return 0;
		}
		if (!strcmp(argv[2], "record")) {
			cli__usage_record(stdout);
			return 0;
		}
		if (!strcmp(argv[2], "agent")) {
			agent__usage(stdout);
			return 0;
		}
		if (!strcmp(argv[2], "report")) {
			report__usage(stdout);
			return 0;
		}
		if (!strcmp(argv[2], "convert")) {
			convert__usage(stdout);
			return 0;
		}
		pr_err("no help for unknown command '%s' (commands: record, agent, report, convert)", argv[2]);
		return 2;
	}
	if (!strcmp(argv[1], "record")) {
		/* > 0: the profile is written, and the command it started failed so */
		err = record__main(argc - 1, argv + 1);
		return err < 0 ? -err : err;
	}
	if (!strcmp(argv[1], "agent")) {
		err = agent__main(argc - 1, argv + 1);
		return err < 0 ? -err : 0;
	}
	if (!strcmp(argv[1], "report")) {
		err = report__main(argc - 1, argv + 1);
		return err < 0 ? -err : 0;
	}
	if (!strcmp(argv[1], "convert")) {
		err = convert__main(argc - 1, argv + 1);
		return err < 0 ? -err : 0;
	}
	pr_err("unknown command '%s' (see gpubpf --help)", argv[1]);
	return 2;
}
