// SPDX-License-Identifier: MIT
/* gpubpf convert: pprof in, pprof, speedscope or folded out. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "convert.h"
#include "folded.h"
#include "log.h"
#include "outfile.h"
#include "pprof.h"
#include "pprof_read.h"
#include "speedscope.h"

struct conv {
	const struct profile *p;
	enum out_format fmt;
	int type_idx;
};

void convert__usage(FILE *f)
{
	fprintf(f, "Usage: gpubpf convert IN -o OUT [--format speedscope|folded|pprof] [--sample-type NAME]\n"
		   "\n"
		   "Reads a pprof profile (gzipped or not; gpubpf's or another tool's) and writes it as:\n"
		   "  speedscope  speedscope's JSON file format: one profile per sample type, with units\n"
		   "  folded      \"process;frame;...;leaf VALUE\" lines of one sample type (flamegraph.pl)\n"
		   "  pprof       gzipped pprof again\n"
		   "The format follows OUT's name (.speedscope.json or .json, .folded or .txt, .pb.gz or\n"
		   ".pb) unless --format says. OUT is written atomically: complete or absent.\n"
		   "\n"
		   "Options:\n"
		   "  -o, --output FILE       where to write (required)\n"
		   "      --format FMT        speedscope, folded or pprof\n"
		   "      --sample-type NAME  folded only: the sample type to write (default: the\n"
		   "                          profile's default, e.g. samples)\n"
		   "  -h, --help              this help\n"
		   "\n"
		   "Example:\n"
		   "  gpubpf convert job.pb.gz -o job.speedscope.json   then open it in speedscope\n");
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

static int write_cb(void *ctx, FILE *f)
{
	const struct conv *c = ctx;

	switch (c->fmt) {
	case FORMAT_SPEEDSCOPE:
		return speedscope__write(c->p, f);
	case FORMAT_FOLDED:
		return folded__write(c->p, c->type_idx, f);
	default:
		return pprof__write(c->p, f);
	}
}

enum { OPT_FORMAT = 256, OPT_TYPE };

int convert__main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"output", required_argument, NULL, 'o'},
	    {"format", required_argument, NULL, OPT_FORMAT},
	    {"sample-type", required_argument, NULL, OPT_TYPE},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *in = NULL, *out = NULL, *fmt = NULL, *type = NULL;
	struct pprof_read_info info;
	struct conv c = {0};
	struct profile *p;
	int opt, err;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":o:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'o':
			out = optarg;
			break;
		case OPT_FORMAT:
			fmt = optarg;
			break;
		case OPT_TYPE:
			type = optarg;
			break;
		case 'h':
			convert__usage(stdout);
			return 0;
		case ':':
			pr_err("convert: option '%s' needs an argument (see gpubpf help convert)", argv[optind - 1]);
			return -EINVAL;
		default:
			pr_err("convert: unknown option '%s' (see gpubpf help convert)", argv[optind - 1]);
			return -EINVAL;
		}
	}
	if (optind < argc)
		in = argv[optind++];
	if (!in || optind < argc) {
		pr_err("convert: expected one input file (see gpubpf help convert)");
		return -EINVAL;
	}
	if (!out || !*out) {
		pr_err("convert: -o OUT is required");
		return -EINVAL;
	}
	if (fmt) {
		if (!strcmp(fmt, "speedscope")) {
			c.fmt = FORMAT_SPEEDSCOPE;
		} else if (!strcmp(fmt, "folded")) {
			c.fmt = FORMAT_FOLDED;
		} else if (!strcmp(fmt, "pprof")) {
			c.fmt = FORMAT_PPROF;
		} else {
			pr_err("convert: unknown --format '%s' (expected speedscope, folded or pprof)", fmt);
			return -EINVAL;
		}
	} else if (ends_with(out, ".speedscope.json") || ends_with(out, ".json")) {
		c.fmt = FORMAT_SPEEDSCOPE;
	} else if (ends_with(out, ".folded") || ends_with(out, ".txt")) {
		c.fmt = FORMAT_FOLDED;
	} else if (ends_with(out, ".pb.gz") || ends_with(out, ".pb")) {
		c.fmt = FORMAT_PPROF;
	} else {
		pr_err("convert: cannot tell the format from '%s': name it .speedscope.json, .folded or .pb.gz, "
		       "or give --format",
		       out);
		return -EINVAL;
	}
	if (type && c.fmt != FORMAT_FOLDED) {
		pr_err("convert: --sample-type applies to --format folded only (the others keep every type)");
		return -EINVAL;
	}
	err = outfile__check(out);
	if (err) {
		pr_err("convert: cannot write %s: %s", out, outfile__strerror(err));
		return err;
	}
	p = pprof_read__file(in, &info);
	if (!p) {
		err = -errno;
		pr_err("convert: %s: %s", in, info.error);
		return err ? err : -EINVAL;
	}
	if (info.nskipped_types)
		pr_warn("convert: %s: sample types left out (the model holds %d): %s", in, PROFILE_MAX_TYPES,
			info.skipped_types);
	if (info.skipped_samples || info.truncated_stacks || info.dropped_labels)
		pr_warn("convert: %s: %zu samples with a wrong value count skipped, %zu stacks cut to %d frames, "
			"%zu labels dropped",
			in, info.skipped_samples, info.truncated_stacks, PROFILE_MAX_FRAMES, info.dropped_labels);
	if (profile__saturated(p))
		pr_warn("convert: %s: %llu sums of its values passed the range of a 64-bit integer and were held at "
			"its limit",
			in, (unsigned long long)profile__saturated(p));
	c.p = p;
	if (type) {
		c.type_idx = profile__find_type(p, type);
		if (c.type_idx < 0) {
			pr_err("convert: %s has no sample type '%s'", in, type);
			profile__free(p);
			return -EINVAL;
		}
	}
	err = outfile__write(out, write_cb, &c);
	if (err)
		pr_err("convert: cannot write %s: %s", out, outfile__strerror(err));
	profile__free(p);
	return err;
}
