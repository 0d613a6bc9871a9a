/* SPDX-License-Identifier: MIT */
/* What a recording is asked to do: `record`'s options, which the engine, the tracers and
 * the session read (cmd/cli.c fills them from the command line, cmd/agent_cli.c from the
 * agent's). */
#ifndef GPUBPF_OPTS_H
#define GPUBPF_OPTS_H

#include <stdbool.h>
#include <stddef.h>

#define CLI_MAX_PIDS 256

enum out_format {
	FORMAT_PPROF = 0,
	FORMAT_FOLDED = 1,
	FORMAT_SPEEDSCOPE = 2,
};

struct record_opts {
	int pids[CLI_MAX_PIDS];
	int npids;
	bool all;	    /* -a */
	bool daemon;	    /* gpubpf agent: runs on when the targets exit */
	bool host_wide;	    /* the agent: watch every process, probe objects host-wide, sample the targets */
	char **command;	    /* argv after --, NULL-terminated, or NULL */
	int freq;	    /* -F, samples per second per CPU */
	double duration;    /* -d seconds, 0 = until stopped or targets exit */
	const char *output; /* -o */
	enum out_format format;
	const char *sample_type; /* --sample-type: folded's type (NULL: samples) */
	bool inherit;		 /* follow children (off with --no-inherit) */
	double budget;		 /* --overhead-budget, percent of each target thread's time */
	bool exact;		 /* --exact: every probe attached all the time */
	bool trace;		 /* --trace: write a timeline of CUDA calls (Chrome trace JSON) */
	size_t max_events;	 /* --max-events: bound of the timeline */
	bool python;		 /* Python frames (off with --no-python) */
	bool no_device_time;	 /* --no-device-time: no device time (COMMAND without the library) */
	bool verbose;		 /* -v */
	bool help;		 /* --help was asked: print usage, exit 0 */
	int argc;		 /* the full command line, for the profile's comments */
	char **argv;
};

#endif /* GPUBPF_OPTS_H */
