// SPDX-License-Identifier: MIT
/* Options of `gpubpf agent`. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "log.h"
#include "pyroscope.h"

void agent__usage(FILE *f)
{
	fprintf(f, "Usage: gpubpf agent [--server URL] [--output-dir DIR] [--interval SECONDS]\n"
		   "                    [--select cuda|all|PID,...|comm=REGEX|cgroup=PATH] [-F HZ]\n"
		   "                    [--overhead-budget PCT] [--labels k=v,...] [--auth-token-file FILE]\n"
		   "                    [--spool-max MB] [--metrics [127.0.0.1:]PORT] [-v]\n"
		   "\n"
		   "Profiles every GPU job on the host, all the time, until SIGTERM or SIGINT: CPU samples,\n"
		   "CUDA calls under the overhead budget, Python frames, and device time for jobs started\n"
		   "with the injection library (CUDA_INJECTION64_PATH), as `gpubpf record` does. Every\n"
		   "interval each process gets one pprof profile of that interval, labelled host, pid,\n"
		   "comm, service, container, rank, local_rank, world_size, gpu and --labels.\n"
		   "\n"
		   "What it profiles (--select, default cuda):\n"
		   "  cuda                    every process that maps a CUDA runtime or driver, from its\n"
		   "                          first CUDA load to its exit, with the children it forks\n"
		   "  all                     every process on the host\n"
		   "  PID[,PID...]            these processes and their children\n"
		   "  comm=REGEX              processes whose name matches REGEX (POSIX extended)\n"
		   "  cgroup=PATH             processes in cgroup PATH or below it\n"
		   "\n"
		   "Where profiles go (without --server: --output-dir " AGENT_DEFAULT_DIR "):\n"
		   "      --server URL        Pyroscope's HTTP ingest API (http:// or https://HOST[:PORT]);\n"
		   "                          profiles wait in an on-disk spool while it is down or\n"
		   "                          failing, are retried with backoff and delivered in order\n"
		   "      --output-dir DIR    also (or only) write DIR/SERVICE/START-PID.pb.gz files\n"
		   "      --retention-size MB keep the files under DIR below MB megabytes (default 1024)\n"
		   "      --retention-age H   remove files older than H hours (default 168)\n"
		   "      --spool-dir DIR     the spool (default OUTPUT_DIR/.spool, " AGENT_DEFAULT_DIR "/.spool)\n"
		   "      --spool-max MB      bound of the spool; past it the oldest profiles are dropped\n"
		   "                          and counted (default 512)\n"
		   "      --auth-token-file FILE  send 'Authorization: Bearer TOKEN', TOKEN read from FILE\n"
		   "      --ca-file FILE      CA certificates for an https server (default: the system's)\n"
		   "\n"
		   "Options:\n"
		   "      --interval SECONDS  one profile per process every SECONDS (default 15, 1..3600)\n"
		   "  -F, --freq HZ           CPU samples per second per CPU (default 99, 1..10000)\n"
		   "      --overhead-budget PCT  keep the estimated cost to every target thread under PCT\n"
		   "                          percent (default 1), as in gpubpf record\n"
		   "      --labels k=v,...    more labels on every profile (names [A-Za-z_][A-Za-z0-9_]*; a\n"
		   "                          name of the agent's own, such as host, replaces its value)\n"
		   "      --no-python         native stacks only\n"
		   "      --metrics [127.0.0.1:]PORT  Prometheus text metrics on 127.0.0.1 only (default:\n"
		   "                          no listening port at all)\n"
		   "  -v, --verbose           debug messages\n"
		   "  -h, --help              this help\n"
		   "\n"
		   "It prints one line at start (what it profiles, where profiles go), then only problems\n"
		   "and one line an hour. Needs root (or CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE). As a\n"
		   "service: packaging/gpubpf-agent.service; see docs/AGENT.md.\n"
		   "\n"
		   "Examples:\n"
		   "  sudo gpubpf agent --server https://pyroscope.example.com --auth-token-file /etc/gpubpf/token\n"
		   "  sudo gpubpf agent --output-dir /var/lib/gpubpf --interval 60\n");
}

int agent__parse_labels(const char *arg, struct agent_opts *o)
{
	char *copy = strdup(arg), *tok, *save = NULL;
	int err = 0;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '='), clean[PYRO_MAX_VALUE + 1];
		struct agent_label *l;

		if (!eq || eq == tok || !eq[1]) {
			pr_err("agent: --labels: '%s' is not NAME=VALUE", tok);
			err = -EINVAL;
			break;
		}
		*eq = '\0';
		if (!pyro__valid_label_name(tok)) {
			pr_err("agent: --labels: '%s' is not a label name ([A-Za-z_][A-Za-z0-9_]*, at most 63, not "
			       "starting with __)",
			       tok);
			err = -EINVAL;
			break;
		}
		pyro__clean_value(clean, sizeof(clean), eq + 1);
		if (strcmp(clean, eq + 1)) {
			pr_err("agent: --labels: the value of %s holds characters a label cannot (spaces at its ends, "
			       "controls, non-ASCII, or one of , { } = \" ' \\) or is longer than %d",
			       tok, PYRO_MAX_VALUE);
			err = -EINVAL;
			break;
		}
		for (l = o->labels; l < o->labels + o->nlabels && strcmp(l->key, tok); l++)
			;
		if (l == o->labels + o->nlabels) {
			if (o->nlabels >= AGENT_MAX_USER_LABELS) {
				pr_err("agent: --labels: at most %d labels", AGENT_MAX_USER_LABELS);
				err = -EINVAL;
				break;
			}
			o->nlabels++;
		}
		snprintf(l->key, sizeof(l->key), "%s", tok);
		snprintf(l->value, sizeof(l->value), "%s", clean);
	}
	free(copy);
	return err;
}

static int parse_select(const char *arg, struct agent_opts *o)
{
	if (!strcmp(arg, "cuda")) {
		o->sel = SEL_CUDA;
	} else if (!strcmp(arg, "all")) {
		o->sel = SEL_ALL;
	} else if (!strncmp(arg, "comm=", 5) && arg[5]) {
		o->sel = SEL_COMM;
		o->sel_arg = arg + 5;
	} else if (!strncmp(arg, "cgroup=", 7) && arg[7] == '/') {
		o->sel = SEL_CGROUP;
		o->sel_arg = arg + 7;
	} else if (arg[0] >= '0' && arg[0] <= '9') {
		char *copy = strdup(arg), *tok, *save = NULL;
		int err = 0;

		if (!copy)
			return -ENOMEM;
		o->sel = SEL_PIDS;
		o->sel_npids = 0;
		for (tok = strtok_r(copy, ",", &save); tok && !err; tok = strtok_r(NULL, ",", &save)) {
			long pid;

			if (cli__parse_int(tok, 1, 4194304, &pid) || o->sel_npids >= CLI_MAX_PIDS) {
				pr_err("agent: --select: '%s' is not a pid (at most %d pids)", tok, CLI_MAX_PIDS);
				err = -EINVAL;
			} else {
				o->sel_pids[o->sel_npids++] = (int)pid;
			}
		}
		free(copy);
		return err;
	} else {
		pr_err("agent: --select '%s': expected cuda, all, PID[,PID...], comm=REGEX or cgroup=/PATH", arg);
		return -EINVAL;
	}
	return 0;
}

enum {
	OPT_SERVER = 256,
	OPT_OUTPUT_DIR,
	OPT_SPOOL_DIR,
	OPT_INTERVAL,
	OPT_SELECT,
	OPT_BUDGET,
	OPT_LABELS,
	OPT_TOKEN,
	OPT_CA,
	OPT_SPOOL_MAX,
	OPT_RET_SIZE,
	OPT_RET_AGE,
	OPT_METRICS,
	OPT_NO_PYTHON,
};

int agent__parse(int argc, char **argv, struct agent_opts *o)
{
	static const struct option longopts[] = {
	    {"server", required_argument, NULL, OPT_SERVER},
	    {"output-dir", required_argument, NULL, OPT_OUTPUT_DIR},
	    {"spool-dir", required_argument, NULL, OPT_SPOOL_DIR},
	    {"interval", required_argument, NULL, OPT_INTERVAL},
	    {"select", required_argument, NULL, OPT_SELECT},
	    {"freq", required_argument, NULL, 'F'},
	    {"overhead-budget", required_argument, NULL, OPT_BUDGET},
	    {"labels", required_argument, NULL, OPT_LABELS},
	    {"auth-token-file", required_argument, NULL, OPT_TOKEN},
	    {"ca-file", required_argument, NULL, OPT_CA},
	    {"spool-max", required_argument, NULL, OPT_SPOOL_MAX},
	    {"retention-size", required_argument, NULL, OPT_RET_SIZE},
	    {"retention-age", required_argument, NULL, OPT_RET_AGE},
	    {"metrics", required_argument, NULL, OPT_METRICS},
	    {"no-python", no_argument, NULL, OPT_NO_PYTHON},
	    {"verbose", no_argument, NULL, 'v'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct record_opts *r = &o->rec;
	long l;
	int c;

	memset(o, 0, sizeof(*o));
	o->interval = 15;
	o->spool_max_mb = 512;
	o->retention_mb = 1024;
	o->retention_h = 168;
	r->freq = 99;
	r->budget = 1.0;
	r->inherit = true;
	r->python = true;
	r->host_wide = true;
	r->daemon = true;
	r->max_events = 1;
	r->argc = argc;
	r->argv = argv;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":F:vh", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_SERVER:
			o->server = optarg;
			break;
		case OPT_OUTPUT_DIR:
		case OPT_SPOOL_DIR:
			if (optarg[0] != '/') {
				pr_err("agent: %s needs an absolute path", argv[optind - 2]);
				return -EINVAL;
			}
			*(c == OPT_OUTPUT_DIR ? &o->output_dir : &o->spool_dir) = optarg;
			break;
		case OPT_INTERVAL:
			if (cli__parse_double(optarg, 1, 3600, &o->interval)) {
				pr_err("agent: invalid --interval '%s': expected seconds, 1..3600", optarg);
				return -EINVAL;
			}
			break;
		case OPT_SELECT:
			if (parse_select(optarg, o))
				return -EINVAL;
			break;
		case 'F':
			if (cli__parse_int(optarg, 1, 10000, &l)) {
				pr_err("agent: invalid -F '%s': expected samples per second, 1..10000", optarg);
				return -EINVAL;
			}
			r->freq = (int)l;
			break;
		case OPT_BUDGET:
			if (cli__parse_double(optarg, 0.01, 100, &r->budget)) {
				pr_err("agent: invalid --overhead-budget '%s': expected a percentage, 0.01..100",
				       optarg);
				return -EINVAL;
			}
			break;
		case OPT_LABELS:
			if (agent__parse_labels(optarg, o))
				return -EINVAL;
			break;
		case OPT_TOKEN:
			o->token_file = optarg;
			break;
		case OPT_CA:
			o->ca_file = optarg;
			break;
		case OPT_SPOOL_MAX:
		case OPT_RET_SIZE:
			if (cli__parse_double(optarg, 0.001, 1e7,
					      c == OPT_SPOOL_MAX ? &o->spool_max_mb : &o->retention_mb)) {
				pr_err("agent: invalid %s '%s': expected megabytes, 0.001..10000000", argv[optind - 2],
				       optarg);
				return -EINVAL;
			}
			break;
		case OPT_RET_AGE:
			if (cli__parse_double(optarg, 0.0001, 1e6, &o->retention_h)) {
				pr_err("agent: invalid --retention-age '%s': expected hours", optarg);
				return -EINVAL;
			}
			break;
		case OPT_METRICS:
			o->metrics = optarg;
			break;
		case OPT_NO_PYTHON:
			r->python = false;
			break;
		case 'v':
			r->verbose = true;
			break;
		case 'h':
			o->help = true;
			return 0;
		case ':':
			pr_err("agent: option '%s' needs an argument (see gpubpf help agent)", argv[optind - 1]);
			return -EINVAL;
		default:
			pr_err("agent: unknown option '%s' (see gpubpf help agent)", argv[optind - 1]);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		pr_err("agent: unexpected argument '%s' (see gpubpf help agent)", argv[optind]);
		return -EINVAL;
	}
	if ((o->token_file || o->ca_file) && !o->server) {
		pr_err("agent: --auth-token-file and --ca-file are for --server");
		return -EINVAL;
	}
	if (!o->server && !o->output_dir)
		o->output_dir = AGENT_DEFAULT_DIR;
	if (o->server && !o->spool_dir) {
		snprintf(o->spool_buf, sizeof(o->spool_buf), "%s/.spool",
			 o->output_dir ? o->output_dir : AGENT_DEFAULT_DIR);
		o->spool_dir = o->spool_buf;
	}
	r->all = o->sel == SEL_ALL;
	return 0;
}
