// SPDX-License-Identifier: MIT
/* gpubpf report's command line: options, the file read as a trace or a profile, and the
 * tables of userspace/cmd/report.c (a profile's) or report_trace.c (a trace's). */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "log.h"
#include "report.h"
#include "ttyesc.h"

void report__usage(FILE *f)
{
	fprintf(f, "Usage: gpubpf report FILE [--top N] [--sample-type NAME] [--raw]\n"
		   "\n"
		   "Prints text tables of a profile (pprof, gzipped or not: gpubpf's, or another tool's as\n"
		   "far as its sample types allow) or of a timeline written by gpubpf (Chrome trace JSON),\n"
		   "the largest first, each with a percentage column:\n"
		   "  CUDA API summary       calls per API function; wait time of synchronizing calls\n"
		   "  GPU kernel summary     device time per kernel when recorded, else launches\n"
		   "  Memory operations      calls and bytes per copy direction and memset\n"
		   "  GPU memory             allocated and still in use, per allocating call site\n"
		   "  Top functions          self and cumulative share of CPU samples\n"
		   "  Top launch call sites  the innermost frame outside CUDA of each launch\n"
		   "A table with no data is replaced by one line saying why. On a trace: count, total,\n"
		   "min, median and max duration per API function, kernel and copy direction.\n"
		   "\n"
		   "Options:\n"
		   "  -n, --top N             rows per table, the rest summed in one row (default 10;\n"
		   "                          0: all)\n"
		   "      --sample-type NAME  the type of the top-functions table (default: CPU samples)\n"
		   "      --raw               exact integers (nanoseconds, bytes) instead of human units\n"
		   "  -h, --help              this help\n"
		   "\n"
		   "Example:\n"
		   "  gpubpf record -o job.pb.gz -- ./train && gpubpf report job.pb.gz\n");
}

/* JSON starts with '{' or '[' (after blanks); pprof is protobuf or gzip. */
static bool looks_like_json(const char *path)
{
	FILE *fp = strcmp(path, "-") ? fopen(path, "rb") : NULL;
	int ch;

	if (!fp)
		return false;
	do
		ch = getc(fp);
	while (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r');
	fclose(fp);
	return ch == '{' || ch == '[';
}

enum { OPT_TYPE = 256, OPT_RAW };

int report__main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"top", required_argument, NULL, 'n'},
	    {"sample-type", required_argument, NULL, OPT_TYPE},
	    {"raw", no_argument, NULL, OPT_RAW},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct report_opts o = {.top = 10};
	struct pprof_read_info info;
	FILE *out = stdout;
	bool said = false;
	const char *path;
	int opt, err;
	long l;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":n:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'n':
			if (cli__parse_int(optarg, 0, 1000000, &l)) {
				pr_err("report: invalid --top '%s': expected a number of rows, 0 for all", optarg);
				return -EINVAL;
			}
			o.top = (int)l;
			break;
		case OPT_TYPE:
			o.sample_type = optarg;
			break;
		case OPT_RAW:
			o.raw = true;
			break;
		case 'h':
			report__usage(stdout);
			return 0;
		case ':':
			pr_err("report: option '%s' needs an argument (see gpubpf help report)", argv[optind - 1]);
			return -EINVAL;
		default:
			pr_err("report: unknown option '%s' (see gpubpf help report)", argv[optind - 1]);
			return -EINVAL;
		}
	}
	if (optind != argc - 1) {
		pr_err("report: expected one file (see gpubpf help report)");
		return -EINVAL;
	}
	path = argv[optind];
	o.source = path;
	/* Names in the tables are the targets' choice: on a terminal, never its commands. */
	if (isatty(STDOUT_FILENO)) {
		out = ttyesc__open(stdout);
		if (!out)
			out = stdout;
	}
	if (looks_like_json(path)) {
		struct trace *t;
		char why[256];

		if (o.sample_type)
			pr_warn("report: --sample-type does not apply to a trace");
		err = trace__read_file(path, &t, why, sizeof(why));
		if (err) {
			pr_err("report: %s: %s", path, why);
			said = true;
			goto out;
		}
		err = report__trace(t, &o, out);
		trace__free(t);
	} else {
		struct profile *p = pprof_read__file(path, &info);

		if (!p) {
			err = errno ? -errno : -EINVAL;
			pr_err("report: %s: %s", path, info.error);
			said = true;
			goto out;
		}
		o.info = &info;
		err = report__profile(p, &o, out);
		profile__free(p);
	}
out:
	if (out != stdout && fclose(out) != 0 && !err)
		err = -EIO;
	if (err && err != -EINVAL && !said)
		pr_err("report: %s", strerror(-err));
	return err;
}
