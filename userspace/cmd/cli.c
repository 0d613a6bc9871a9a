// SPDX-License-Identifier: MIT
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "log.h"
#include "version.h" /* GPUBPF_VERSION, generated (Makefile) */

void cli__usage_main(FILE *f)
{
	fprintf(f,
		"gpubpf %s — always-on CPU+GPU profiler for CUDA jobs, built on eBPF\n"
		"\n"
		"Usage:\n"
		"  gpubpf record [options] -p PID[,PID...]   profile running processes\n"
		"  gpubpf record [options] -- COMMAND ...    start COMMAND and profile it\n"
		"  gpubpf record [options] -a                profile every process on the host\n"
		"  gpubpf agent [options]                    profile every GPU job on the host, all the\n"
		"                                            time, to Pyroscope or a directory\n"
		"  gpubpf report FILE [--top N]              summary tables of a profile or trace\n"
		"  gpubpf convert IN -o OUT [--format FMT]   pprof to speedscope, folded or pprof\n"
		"  gpubpf help [COMMAND]                     show help (record, agent, report, convert)\n"
		"  gpubpf --version\n"
		"\n"
		"The output is a gzipped pprof profile. Look at it with:\n"
		"  go tool pprof -top gpubpf.pb.gz\n"
		"  go tool pprof -http=:8080 gpubpf.pb.gz\n"
		"or open it in https://www.speedscope.app. Run `gpubpf help record` for the options.\n",
		GPUBPF_VERSION);
}

void cli__usage_record(FILE *f)
{
	fprintf(f, "Usage: gpubpf record [-p PID[,PID...] | -a | -- COMMAND [ARGS...]] [-F HZ] [-d SECONDS]\n"
		   "                     [-o FILE] [--format pprof|folded|speedscope [--sample-type NAME]]\n"
		   "                     [--no-inherit]\n"
		   "                     [--overhead-budget PCT | --exact] [--no-python] [--no-device-time] [-v]\n"
		   "\n"
		   "Samples CPU stacks of the targets and writes one profile when recording ends:\n"
		   "at Ctrl-C or SIGTERM, when -d expires, or when every target has exited.\n"
		   "\n"
		   "Targets (exactly one of):\n"
		   "  -p, --pid PID[,PID...]  attach to running processes (and the processes they fork\n"
		   "                          after attach, unless --no-inherit)\n"
		   "  -a, --all               every process on the host (except gpubpf itself)\n"
		   "  -- COMMAND [ARGS...]    start COMMAND, profile it and its children until it exits\n"
		   "\n"
		   "Options:\n"
		   "  -F, --freq HZ           CPU samples per second of each target thread's CPU time, on its\n"
		   "                          own clock (per CPU with -a, and where the threads' own clocks\n"
		   "                          cost their context switches over half the budget: see\n"
		   "                          --overhead-budget; default 99, 1..10000)\n"
		   "  -d, --duration SECONDS  stop after this long (default: until stopped or targets exit);\n"
		   "                          under 8 s the sampling windows' periods are an eighth of it\n"
		   "                          (1 s otherwise), so that estimates come with an interval\n"
		   "  -o, --output FILE       output file (default gpubpf.pb.gz): written to a temporary\n"
		   "                          file and renamed, so it is complete or absent; created mode\n"
		   "                          0600 (profiles hold other users' command lines, paths and\n"
		   "                          symbols), an existing file keeps its mode and owner; a\n"
		   "                          character device or FIFO (/dev/stdout) is written in place\n"
		   "      --format FMT        pprof (gzipped protobuf, default), folded (flamegraph.pl:\n"
		   "                          one \"process;frame;...;leaf COUNT\" line per stack) or\n"
		   "                          speedscope (its JSON format, one profile per sample type)\n"
		   "      --sample-type NAME  folded only: the sample type to write (default samples;\n"
		   "                          cpu, cuda_calls, cuda_launches, cuda_memcpy, cuda_sync_wait,\n"
		   "                          gpu_alloc, gpu_inuse, gpu_kernel_time, gpu_memcpy_time)\n"
		   "      --no-inherit        do not follow children forked after attach\n"
		   "      --no-device-time    no device-side kernel and copy time: COMMAND is not started\n"
		   "                          with the injection library, and one a target already has\n"
		   "                          stays idle (CUPTI never set up; see docs/DEVICE_TIME.md)\n"
		   "      --no-python         native stacks only: do not read CPython's frames (default:\n"
		   "                          Python 3.10-3.13 frames replace the interpreter's own)\n"
		   "      --overhead-budget PCT  keep gpubpf's estimated cost to every target thread under\n"
		   "                          PCT percent of its time (default 1): hot CUDA probe groups\n"
		   "                          (launches, copies) are attached in windows and their counts\n"
		   "                          scaled to estimates; rare ones stay attached (a budget under\n"
		   "                          what CPU sampling costs, 0.1-0.3%% at 99 Hz, or under a hot\n"
		   "                          group's floor, 0.2%% of every period, is said, warned of\n"
		   "                          where far under, and the plan stays at those floors; a period\n"
		   "                          that went over it, planned from a cost measured low as a job\n"
		   "                          just started reads, is repaid from the next ones). The cost is\n"
		   "                          measured in parts, said in the profile's comments: the probes'\n"
		   "                          programs (timed in the job), their traps (calibrated at\n"
		   "                          start-up, then timed in the job by the kernel's ticks of a\n"
		   "                          busy thread's kernel time), the probes in with no window open\n"
		   "                          (attaching waits for the kernel: timed in the job), a window's\n"
		   "                          switches (calibrated), CPU samples (the interrupt calibrated,\n"
		   "                          the stack walk timed in the job, as often as the most sampled\n"
		   "                          thread is: one that mostly sleeps pays for the few samples of\n"
		   "                          its own CPU time, not for -F a second), the sampler's events\n"
		   "                          in the targets' context switches (each thread's own event is\n"
		   "                          stopped and started at each: calibrated, times the most switched\n"
		   "                          thread's switches, up to all threads' where they hand work to\n"
		   "                          each other; 10-40%% for a pair that does nothing else, \"cost:\n"
		   "                          context switches\"; over half the budget, sampling goes per\n"
		   "                          CPU: no event of a thread's own, nothing added to a switch),\n"
		   "                          and gpubpf's own CPU time where no CPU it may use was idle (a\n"
		   "                          job that fills the machine: its busiest thread's fair share of\n"
		   "                          it, from /proc/stat, its set-up's 0.2-0.3 s too where it attached\n"
		   "                          with -p, and its symbolizing after the recording where the\n"
		   "                          targets run on, repaid from the budget, up to all of it in the\n"
		   "                          range, \"cost: \");\n"
		   "                          the traps' range gives the cost's (\"overhead ~1.2%% (1-1.6%%)\").\n"
		   "                          Not counted: the job's own code running slower after each hit\n"
		   "                          (its caches refilled), which nothing in the job can time: a fifth\n"
		   "                          to a third of a hit's cost more in a Python-driven loop measured\n"
		   "                          apart (docs/BENCHMARKS.md): there the probes' cost comes out low\n"
		   "                          by that much, and a launch-bound loop's launch counts low with it\n"
		   "                          (inside their interval: the ticks see the traps' kernel side\n"
		   "                          only, and leave the traps' calibrated top, 2.5 times, in place).\n"
		   "                          Nearly all of it is the trap's: GPUBPF_BARE_EVERY=8 has one call\n"
		   "                          in 8 of a window skip its stack walks and map updates (its stack\n"
		   "                          not taken; the others count for it), measures what that work\n"
		   "                          costs the job beyond its run time and counts it (0.04-0.06 us in\n"
		   "                          a Python step here, \"cuda cost:\").\n"
		   "                          The time outside a thread's windows counts at its rate without\n"
		   "                          the probes, as far as a delay pushes calls out at all: one call\n"
		   "                          in 4 of a window is held 0.5 us more at random, and the gap to\n"
		   "                          the thread's next call tells (a launch into a full device queue\n"
		   "                          waits for the device, which absorbs the delay) (\"cuda estimate:\");\n"
		   "                          with device time, the device's records tell it exactly: a\n"
		   "                          launch's kernel started as launched, or waited for the one before\n"
		   "                          it (\"gpu correction:\"); where either shows a device setting the\n"
		   "                          pace, the summary's overhead is the job's slowdown, that share of\n"
		   "                          the thread's cost (the budget still spends the thread's time)\n"
		   "                          Device time too: the injection library times in the job what\n"
		   "                          CUPTI's activity and callbacks add to a launch (again every 5\n"
		   "                          minutes: GPUBPF_DEVICE_REMEASURE seconds, 0 once), and CUPTI's\n"
		   "                          dispatch to the callbacks on a driver call of its own (the\n"
		   "                          H100's 0.6 us a launch at least), then turns them\n"
		   "                          on only in windows of the duty the budget allows a thread that\n"
		   "                          does nothing but launch (\"gpu cost:\" and \"gpu estimate:\");\n"
		   "                          what it spends once (CUPTI's set-up at attach, the measurement,\n"
		   "                          callbacks on to name kernels: tens of ms) is repaid from the\n"
		   "                          budget, up to half of it kept back each period until repaid\n"
		   "      --exact             every CUDA probe attached and every launch's device time\n"
		   "                          followed all the time: exact counts, at a cost of a few\n"
		   "                          microseconds per traced call, and per launch CUPTI's cost\n"
		   "                          (1.2-1.5 us on an H100), which only windows measure: the\n"
		   "                          estimated overhead then leaves it out, and says so\n"
		   "      --trace             write a timeline instead of a profile: every CUDA API call with\n"
		   "                          its start and duration, per process and thread, and (targets with\n"
		   "                          the injection library) every kernel and copy per device and\n"
		   "                          stream, with an arrow from its launch; Chrome trace JSON for\n"
		   "                          Perfetto or chrome://tracing (-o defaults to gpubpf.trace.json;\n"
		   "                          implies --exact)\n"
		   "      --max-events N      bound of the timeline (default 1000000); events past it are\n"
		   "                          counted as dropped\n"
		   "  -v, --verbose           debug messages, including libbpf's\n"
		   "  -h, --help              this help\n"
		   "\n"
		   "Needs root (or CAP_BPF and CAP_PERFMON) and a kernel with BTF. A command started with\n"
		   "-- is held (stopped) for the milliseconds it takes to probe each library it loads\n"
		   "(once a load; the profile's \"cost: holds:\" comment says how long in all), and\n"
		   "always resumed: by gpubpf, or if gpubpf is killed, by its guardian process\n"
		   "(gpubpf-guard). Processes attached with -p or -a are never stopped.\n"
		   "\n"
		   "Exit status: 0 once the profile is written; with -- COMMAND, COMMAND's own status\n"
		   "where it failed (128+N where signal N killed it), the profile written all the same;\n"
		   "128+N where signal N stopped gpubpf before COMMAND was let go (COMMAND never ran,\n"
		   "nothing written); else an errno value (1-127) where gpubpf itself failed and wrote\n"
		   "nothing. Stopping gpubpf alone once COMMAND runs leaves it running, unprofiled.\n"
		   "\n"
		   "Examples:\n"
		   "  sudo gpubpf record -p 1234 -d 30               30 s of a running job\n"
		   "  sudo gpubpf record -o train.pb.gz -- python train.py\n"
		   "  go tool pprof -top train.pb.gz                 top functions\n");
}

int cli__parse_int(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int cli__parse_double(const char *s, double min, double max, double *out)
{
	char *end;
	double v;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !isfinite(v) || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_pids(const char *arg, struct record_opts *o)
{
	char *copy = strdup(arg), *tok, *save = NULL;
	int err = 0;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		long pid;

		if (cli__parse_int(tok, 1, 4194304, &pid)) {
			pr_err("record: invalid pid '%s' (expected a positive number)", tok);
			err = -EINVAL;
			break;
		}
		if (o->npids >= CLI_MAX_PIDS) {
			pr_err("record: too many pids (at most %d)", CLI_MAX_PIDS);
			err = -EINVAL;
			break;
		}
		o->pids[o->npids++] = (int)pid;
	}
	if (!err && o->npids == 0) {
		pr_err("record: -p needs at least one pid");
		err = -EINVAL;
	}
	free(copy);
	return err;
}

enum {
	OPT_FORMAT = 256,
	OPT_NO_INHERIT,
	OPT_BUDGET,
	OPT_EXACT,
	OPT_TRACE,
	OPT_MAX_EVENTS,
	OPT_NO_PYTHON,
	OPT_NO_DEVICE_TIME,
	OPT_SAMPLE_TYPE
};

int cli__parse_record(int argc, char **argv, struct record_opts *o)
{
	static const struct option longopts[] = {
	    {"pid", required_argument, NULL, 'p'},
	    {"all", no_argument, NULL, 'a'},
	    {"freq", required_argument, NULL, 'F'},
	    {"duration", required_argument, NULL, 'd'},
	    {"output", required_argument, NULL, 'o'},
	    {"format", required_argument, NULL, OPT_FORMAT},
	    {"sample-type", required_argument, NULL, OPT_SAMPLE_TYPE},
	    {"no-inherit", no_argument, NULL, OPT_NO_INHERIT},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {"overhead-budget", required_argument, NULL, OPT_BUDGET},
	    {"exact", no_argument, NULL, OPT_EXACT},
	    {"trace", no_argument, NULL, OPT_TRACE},
	    {"max-events", required_argument, NULL, OPT_MAX_EVENTS},
	    {"no-python", no_argument, NULL, OPT_NO_PYTHON},
	    {"no-device-time", no_argument, NULL, OPT_NO_DEVICE_TIME},
	    {NULL, 0, NULL, 0},
	};
	int c, modes;
	bool output_set = false, format_set = false;
	long l;

	memset(o, 0, sizeof(*o));
	o->freq = 99;
	o->output = "gpubpf.pb.gz";
	o->inherit = true;
	o->python = true;
	o->budget = 1.0;
	o->max_events = 1000000;
	o->argc = argc;
	o->argv = argv;

	optind = 1;
	opterr = 0;
	/* '+': stop at the first non-option so "-- cmd -x" keeps the command's options. */
	while ((c = getopt_long(argc, argv, "+:p:aF:d:o:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (parse_pids(optarg, o))
				return -EINVAL;
			break;
		case 'a':
			o->all = true;
			break;
		case 'F':
			if (cli__parse_int(optarg, 1, 10000, &l)) {
				pr_err("record: invalid -F '%s': expected samples per second, 1..10000", optarg);
				return -EINVAL;
			}
			o->freq = (int)l;
			break;
		case 'd':
			if (cli__parse_double(optarg, 0.001, 1e9, &o->duration)) {
				pr_err("record: invalid -d '%s': expected a positive number of seconds", optarg);
				return -EINVAL;
			}
			break;
		case 'o':
			if (!*optarg) {
				pr_err("record: -o needs a file name");
				return -EINVAL;
			}
			o->output = optarg;
			output_set = true;
			break;
		case OPT_FORMAT:
			format_set = true;
			if (!strcmp(optarg, "pprof")) {
				o->format = FORMAT_PPROF;
			} else if (!strcmp(optarg, "folded")) {
				o->format = FORMAT_FOLDED;
			} else if (!strcmp(optarg, "speedscope")) {
				o->format = FORMAT_SPEEDSCOPE;
			} else {
				pr_err("record: unknown --format '%s' (expected pprof, folded or speedscope)", optarg);
				return -EINVAL;
			}
			break;
		case OPT_SAMPLE_TYPE:
			o->sample_type = optarg;
			break;
		case OPT_NO_INHERIT:
			o->inherit = false;
			break;
		case OPT_BUDGET:
			if (cli__parse_double(optarg, 0.01, 100, &o->budget)) {
				pr_err("record: invalid --overhead-budget '%s': expected a percentage, 0.01..100",
				       optarg);
				return -EINVAL;
			}
			break;
		case OPT_EXACT:
			o->exact = true;
			break;
		case OPT_TRACE:
			o->trace = true;
			break;
		case OPT_MAX_EVENTS:
			if (cli__parse_int(optarg, 1, 1000000000, &l)) {
				pr_err("record: invalid --max-events '%s': expected a count, 1..1000000000", optarg);
				return -EINVAL;
			}
			o->max_events = (size_t)l;
			break;
		case OPT_NO_DEVICE_TIME:
			o->no_device_time = true;
			break;
		case OPT_NO_PYTHON:
			o->python = false;
			break;
		case 'v':
			o->verbose = true;
			break;
		case 'h':
			o->help = true;
			return 0;
		case ':':
			pr_err("record: option '%s' needs an argument (see gpubpf help record)", argv[optind - 1]);
			return -EINVAL;
		default:
			pr_err("record: unknown option '%s' (see gpubpf help record)", argv[optind - 1]);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		/* getopt_long stops before a bare word, and consumes "--" itself. */
		if (strcmp(argv[optind - 1], "--") != 0) {
			pr_err("record: unexpected argument '%s' (to start a command, put it after --)", argv[optind]);
			return -EINVAL;
		}
		o->command = &argv[optind];
	} else if (optind > 1 && !strcmp(argv[optind - 1], "--")) {
		pr_err("record: no command after --");
		return -EINVAL;
	}
	if (o->sample_type) {
		static const char *const known[] = {
		    "samples",	      "cpu",	   "cuda_calls", "cuda_launches",   "cuda_memcpy",
		    "cuda_sync_wait", "gpu_alloc", "gpu_inuse",	 "gpu_kernel_time", "gpu_memcpy_time"};
		bool ok = false;

		if (o->format != FORMAT_FOLDED || o->trace) {
			pr_err("record: --sample-type applies to --format folded only (pprof and speedscope keep every "
			       "type)");
			return -EINVAL;
		}
		for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
			ok |= !strcmp(o->sample_type, known[i]);
		if (!ok) {
			pr_err(
			    "record: unknown --sample-type '%s' (samples, cpu, cuda_calls, cuda_launches, cuda_memcpy, "
			    "cuda_sync_wait, gpu_alloc, gpu_inuse, gpu_kernel_time, gpu_memcpy_time)",
			    o->sample_type);
			return -EINVAL;
		}
	}
	if (o->trace) {
		if (format_set) {
			pr_err("record: --trace writes a timeline: it does not take --format");
			return -EINVAL;
		}
		/* Windows would leave holes in a timeline. */
		o->exact = true;
		if (!output_set)
			o->output = "gpubpf.trace.json";
	}
	modes = (o->npids > 0) + o->all + (o->command != NULL);
	if (modes == 0) {
		pr_err("record: nothing to record: give -p PID, -a, or -- COMMAND (see gpubpf help record)");
		return -EINVAL;
	}
	if (modes > 1) {
		pr_err("record: -p, -a and -- COMMAND are exclusive: choose one");
		return -EINVAL;
	}
	return 0;
}
