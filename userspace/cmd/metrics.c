// SPDX-License-Identifier: MIT
#define _GNU_SOURCE /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli.h"
#include "log.h"
#include "metrics.h"

struct metrics {
	int fd;
	struct agent_stats *st;
	pthread_t thread;
	_Atomic bool stop;
};

int metrics__parse(const char *arg, int *family, int *port)
{
	const char *p = arg;
	long v;

	*family = AF_INET;
	if (!strncmp(arg, "127.0.0.1:", 10)) {
		p = arg + 10;
	} else if (!strncmp(arg, "localhost:", 10)) {
		p = arg + 10;
	} else if (!strncmp(arg, "[::1]:", 6)) {
		p = arg + 6;
		*family = AF_INET6;
	} else if (strchr(arg, ':')) {
		pr_err("agent: --metrics %s: it listens on 127.0.0.1 or [::1] only (give PORT or 127.0.0.1:PORT)", arg);
		return -EINVAL;
	}
	if (cli__parse_int(p, 1, 65535, &v)) {
		pr_err("agent: --metrics %s: expected a port, 1..65535", arg);
		return -EINVAL;
	}
	*port = (int)v;
	return 0;
}

#define LINE(name, type, help, val)                                                                                    \
	do {                                                                                                           \
		int _n = snprintf(buf + off, cap - off, "# HELP %s %s\n# TYPE %s %s\n%s %s\n", name, help, name, type, \
				  name, val);                                                                          \
		if (_n > 0 && (size_t)_n < cap - off)                                                                  \
			off += (size_t)_n;                                                                             \
	} while (0)

size_t metrics__format(const struct agent_stats *st, char *buf, size_t cap)
{
	static const struct {
		const char *name, *type, *help;
		size_t field;
	} m[] = {
#define F(f) offsetof(struct agent_stats, f)
	    {"gpubpf_agent_profiles_total", "counter",
	     "Profiles cut from the recording (one per process and interval).", F(profiles)},
	    {"gpubpf_agent_profile_bytes_total", "counter", "Bytes of those profiles (gzipped pprof).",
	     F(profile_bytes)},
	    {"gpubpf_agent_files_written_total", "counter", "Profiles written under --output-dir.", F(written)},
	    {"gpubpf_agent_file_errors_total", "counter", "Profiles that could not be written under --output-dir.",
	     F(write_errors)},
	    {"gpubpf_agent_files_removed_total", "counter", "Files removed under --output-dir by retention.",
	     F(removed)},
	    {"gpubpf_agent_profiles_spooled_total", "counter", "Profiles put into the spool for the server.",
	     F(spooled)},
	    {"gpubpf_agent_profiles_sent_total", "counter", "Profiles the server accepted.", F(sent)},
	    {"gpubpf_agent_sent_bytes_total", "counter", "Bytes of the profiles the server accepted.", F(sent_bytes)},
	    {"gpubpf_agent_profiles_dropped_spool_full_total", "counter",
	     "Oldest spooled profiles dropped to stay under --spool-max.", F(dropped_full)},
	    {"gpubpf_agent_profiles_dropped_unreadable_total", "counter", "Spool files that could not be read back.",
	     F(dropped_bad)},
	    {"gpubpf_agent_profiles_rejected_total", "counter",
	     "Profiles the server refused with a 4xx about the profile itself (dropped).", F(rejected)},
	    {"gpubpf_agent_send_failures_total", "counter", "Upload attempts that failed and are retried.",
	     F(send_failures)},
	    {"gpubpf_agent_uploads_total", "counter", "Upload attempts.", F(uploads)},
	    {"gpubpf_agent_upload_cpu_microseconds_total", "counter", "CPU time of the sender thread in uploads.",
	     F(upload_cpu_us)},
	    {"gpubpf_agent_spool_profiles", "gauge", "Profiles waiting in the spool.", F(spool_queued)},
	    {"gpubpf_agent_spool_bytes", "gauge", "Bytes waiting in the spool.", F(spool_bytes)},
	    {"gpubpf_agent_targets", "gauge", "Processes profiled now.", F(targets)},
	    {"gpubpf_agent_processes_selected_total", "counter", "Processes selected since the start.",
	     F(selected_total)},
	    {"gpubpf_agent_session_renewals_total", "counter",
	     "Times the recording session was set up anew to forget exited processes.", F(renewals)},
#undef F
	};
	size_t off = 0;
	char v[32];

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
		const _Atomic uint64_t *p = (const _Atomic uint64_t *)((const char *)st + m[i].field);

		snprintf(v, sizeof(v), "%llu", (unsigned long long)atomic_load(p));
		LINE(m[i].name, m[i].type, m[i].help, v);
	}
	snprintf(v, sizeof(v), "%.6f", (double)atomic_load(&st->overhead_ppm) / 1e6);
	LINE("gpubpf_agent_estimated_overhead_ratio", "gauge",
	     "Estimated cost of profiling to the busiest target thread (a fraction of its time).", v);
	return off;
}

static void serve(struct metrics *m, int c)
{
	char req[2048], body[8192], head[256];
	struct timeval tv = {.tv_sec = 2};
	size_t got = 0;
	int n;

	req[0] = '\0';
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	/* The request line and headers, bounded: nothing else is read. */
	while (got < sizeof(req) - 1 && !strstr(req, "\r\n\r\n")) {
		ssize_t r = recv(c, req + got, sizeof(req) - 1 - got, 0);

		if (r <= 0)
			break;
		got += (size_t)r;
		req[got] = '\0';
	}
	req[got] = '\0';
	if (!strncmp(req, "GET /metrics ", 13) || !strncmp(req, "GET / ", 6)) {
		size_t len = metrics__format(m->st, body, sizeof(body));

		n = snprintf(head, sizeof(head),
			     "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: %zu\r\n"
			     "Connection: close\r\n\r\n",
			     len);
		if (send(c, head, (size_t)n, MSG_NOSIGNAL) == n)
			send(c, body, len, MSG_NOSIGNAL);
	} else {
		static const char nf[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

		send(c, nf, sizeof(nf) - 1, MSG_NOSIGNAL);
	}
	close(c);
}

static void *run(void *arg)
{
	struct metrics *m = arg;

	while (!atomic_load(&m->stop)) {
		struct pollfd p = {.fd = m->fd, .events = POLLIN};
		int c;

		if (poll(&p, 1, 250) <= 0)
			continue;
		c = accept4(m->fd, NULL, NULL, SOCK_CLOEXEC);
		if (c >= 0)
			serve(m, c);
	}
	return NULL;
}

struct metrics *metrics__start(const char *arg, struct agent_stats *st)
{
	struct metrics *m = calloc(1, sizeof(*m));
	struct sockaddr_storage ss = {0};
	socklen_t sl;
	sigset_t all, old;
	int family, port, one = 1, err;

	if (!m)
		return NULL;
	m->fd = -1;
	m->st = st;
	err = metrics__parse(arg, &family, &port);
	if (err)
		goto fail;
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sl = sizeof(*a);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		a->sin6_addr = in6addr_loopback;
		sl = sizeof(*a);
	}
	m->fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (m->fd < 0 || setsockopt(m->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(m->fd, (struct sockaddr *)&ss, sl) || listen(m->fd, 8)) {
		err = -errno;
		pr_err("agent: --metrics %s: cannot listen: %s", arg, strerror(-err));
		goto fail;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = -pthread_create(&m->thread, NULL, run, m);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		pr_err("agent: cannot start the metrics thread: %s", strerror(-err));
		goto fail;
	}
	return m;
fail:
	if (m->fd >= 0)
		close(m->fd);
	free(m);
	errno = -err;
	return NULL;
}

void metrics__stop(struct metrics *m)
{
	if (!m)
		return;
	atomic_store(&m->stop, true);
	pthread_join(m->thread, NULL);
	close(m->fd);
	free(m);
}
