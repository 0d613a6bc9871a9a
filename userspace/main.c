// SPDX-License-Identifier: MIT
/* gpubpf: command dispatch. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "log.h"
#include "record.h"

int main(int argc, char **argv)
{
	int err;

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
		pr_err("no help for unknown command '%s' (commands: record)", argv[2]);
		return 2;
	}
	if (!strcmp(argv[1], "record")) {
		err = record__main(argc - 1, argv + 1);
		return err < 0 ? -err : 0;
	}
	pr_err("unknown command '%s' (see gpubpf --help)", argv[1]);
	return 2;
}
