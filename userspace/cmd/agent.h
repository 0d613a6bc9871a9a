/* SPDX-License-Identifier: MIT */
/* `gpubpf agent`: continuous profiling of every GPU job on a host. The engine (engine.c)
 * records as `record -a` would, but only the selected processes (agent_select.c); every
 * interval the model is cut into one pprof per process (agent_cut.c) with the process's
 * labels (agent_labels.c), spooled on disk (spool.c) and sent to Pyroscope's ingest API
 * (ingest.c, pyroscope.c) and/or written under an output directory (agent_out.c). */
#ifndef GPUBPF_AGENT_H
#define GPUBPF_AGENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli.h"

#define AGENT_MAX_USER_LABELS 16
#define AGENT_DEFAULT_DIR "/var/lib/gpubpf"

enum agent_sel {
	SEL_CUDA = 0, /* processes that map a CUDA runtime or driver (default) */
	SEL_ALL,      /* every process on the host */
	SEL_PIDS,     /* these pids and their children */
	SEL_COMM,     /* processes whose name matches a regular expression */
	SEL_CGROUP,   /* processes in a cgroup or below it */
};

struct agent_label {
	char key[64];
	char value[256];
};

struct agent_opts {
	struct record_opts rec; /* what the engine runs with */
	const char *server;	/* --server URL, or NULL */
	const char *output_dir; /* --output-dir, or NULL: no files (unless there is no server) */
	const char *spool_dir;	/* --spool-dir (default OUTPUT_DIR/.spool) */
	const char *token_file; /* --auth-token-file */
	const char *ca_file;	/* --ca-file */
	const char *metrics;	/* --metrics [127.0.0.1:]PORT */
	double interval;	/* --interval seconds */
	double spool_max_mb;	/* --spool-max */
	double retention_mb;	/* --retention-size */
	double retention_h;	/* --retention-age, hours */
	enum agent_sel sel;
	const char *sel_arg; /* the REGEX or PATH */
	int sel_pids[CLI_MAX_PIDS];
	int sel_npids;
	struct agent_label labels[AGENT_MAX_USER_LABELS]; /* --labels */
	int nlabels;
	bool help;
	char spool_buf[4096];
};

/* Counters every part of the agent updates; --metrics and the hourly line read them. */
struct agent_stats {
	_Atomic uint64_t profiles;	 /* cut from the model */
	_Atomic uint64_t profile_bytes;	 /* their gzipped size */
	_Atomic uint64_t written;	 /* files written under --output-dir */
	_Atomic uint64_t write_errors;	 /* files that could not be written */
	_Atomic uint64_t removed;	 /* files removed by retention */
	_Atomic uint64_t spooled;	 /* profiles put into the spool */
	_Atomic uint64_t sent;		 /* accepted by the server */
	_Atomic uint64_t sent_bytes;	 /* their size */
	_Atomic uint64_t dropped_full;	 /* oldest spooled profiles dropped: --spool-max */
	_Atomic uint64_t dropped_bad;	 /* spool entries unreadable (a torn or foreign file) */
	_Atomic uint64_t rejected;	 /* answered 4xx for the profile itself: will never be accepted */
	_Atomic uint64_t send_failures;	 /* attempts that failed and will be retried */
	_Atomic uint64_t upload_cpu_us;	 /* CPU time of the sender thread in uploads */
	_Atomic uint64_t uploads;	 /* attempts, for CPU per upload */
	_Atomic uint64_t targets;	 /* processes profiled now */
	_Atomic uint64_t overhead_ppm;	 /* estimated overhead, parts per million of the busiest thread */
	_Atomic uint64_t spool_queued;	 /* profiles waiting in the spool now */
	_Atomic uint64_t spool_bytes;	 /* their bytes */
	_Atomic uint64_t selected_total; /* processes selected since the start */
	_Atomic uint64_t renewals;	 /* times the session was set up anew */
};

/* `gpubpf agent ...` (argv[0] is "agent"). Returns 0 or a negative errno. */
int agent__main(int argc, char **argv);

/* agent_cli.c */
int agent__parse(int argc, char **argv, struct agent_opts *o);
void agent__usage(FILE *f);
/* "k=v,k2=v2" into o->labels; 0 or -EINVAL after one clear line. */
int agent__parse_labels(const char *arg, struct agent_opts *o);

#endif /* GPUBPF_AGENT_H */
