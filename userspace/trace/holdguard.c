// SPDX-License-Identifier: MIT
#define _GNU_SOURCE /* close_range */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "holdguard.h"

#define HOLD_MAX 1024 /* the size of bpf/procs.bpf.c's held and pause_pids maps */

/* After gpubpf died, its BPF programs stay attached until the kernel has released its
 * links, which happens as its descriptors close: a hold can still begin in that short
 * time. The guardian looks again for this long. */
#define GUARD_ROUNDS 40
#define GUARD_ROUND_NS 25000000L

static int collect(int fd, uint32_t *keys, int max)
{
	uint32_t k, *prev = NULL;
	int n = 0;

	while (n < max && bpf_map_get_next_key(fd, prev, &k) == 0) {
		keys[n] = k;
		prev = &keys[n++];
	}
	return n;
}

void holdguard__resume(pid_t pid)
{
	kill(pid, SIGCONT);
}

void holdguard__forget(int held_fd, pid_t pid)
{
	uint32_t k = (uint32_t)pid;

	if (held_fd >= 0)
		bpf_map_delete_elem(held_fd, &k);
}

int holdguard__resume_all(int pause_fd, int held_fd)
{
	uint32_t keys[HOLD_MAX];
	int n;

	if (pause_fd >= 0) {
		n = collect(pause_fd, keys, HOLD_MAX);
		for (int i = 0; i < n; i++)
			bpf_map_delete_elem(pause_fd, &keys[i]);
	}
	if (held_fd < 0)
		return 0;
	n = collect(held_fd, keys, HOLD_MAX);
	for (int i = 0; i < n; i++)
		holdguard__resume((pid_t)keys[i]);
	return n;
}

/* The guardian: only system calls from here on (it was forked from gpubpf). */
static void __attribute__((noreturn)) guard_main(int ctl, int pause_fd, int held_fd)
{
	struct timespec ts = {0, GUARD_ROUND_NS};
	ssize_t n;
	char c = 0;

	/* A Ctrl-C or a kill of gpubpf's process group must not take the guardian too. */
	setsid();
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	prctl(PR_SET_NAME, "gpubpf-guard", 0, 0, 0);
	do
		n = read(ctl, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n == 1 && c == 'q')
		_exit(0);
	/* gpubpf is gone without saying goodbye: nothing else will resume what it held. */
	for (int i = 0; i < GUARD_ROUNDS; i++) {
		holdguard__resume_all(pause_fd, held_fd);
		nanosleep(&ts, NULL);
	}
	_exit(0);
}

/* Move FD to exactly TO (TO is below every fd we still need, which were moved high). */
static int place_fd(int fd, int to)
{
	return fd == to ? 0 : dup2(fd, to) < 0 ? -1 : 0;
}

int holdguard__start(struct holdguard *g, int pause_fd, int held_fd)
{
	int pfd[2];
	pid_t pid;

	g->pid = 0;
	g->ctl_fd = -1;
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		int err = -errno;

		close(pfd[0]);
		close(pfd[1]);
		return err;
	}
	if (pid == 0) {
		/* Keep the two maps and the pipe, nothing else: the guardian must not hold
		 * gpubpf's BPF links (they would outlive it) nor the command's gate. */
		int a = fcntl(pfd[0], F_DUPFD, 100), b = fcntl(pause_fd, F_DUPFD, 100),
		    c = fcntl(held_fd, F_DUPFD, 100);

		int n0 = open("/dev/null", O_RDWR | O_CLOEXEC), null = n0 >= 0 ? fcntl(n0, F_DUPFD, 100) : -1;

		if (n0 >= 0)
			close(n0);

		if (a < 0 || b < 0 || c < 0 || place_fd(a, 3) || place_fd(b, 4) || place_fd(c, 5))
			_exit(127);
		/* Nor anyone's output pipe: a caller reading gpubpf's stderr to EOF must not
		 * wait for the guardian. */
		if (null >= 0)
			for (int i = 0; i < 3; i++)
				dup2(null, i);
		close_range(6, ~0U, 0);
		guard_main(3, 4, 5);
	}
	close(pfd[0]);
	g->pid = pid;
	g->ctl_fd = pfd[1];
	return 0;
}

void holdguard__stop(struct holdguard *g)
{
	if (g->ctl_fd >= 0) {
		if (write(g->ctl_fd, "q", 1) < 0) {
			/* it is gone already: nothing to tell */
		}
		close(g->ctl_fd);
		g->ctl_fd = -1;
	}
	if (g->pid > 0) {
		waitpid(g->pid, NULL, 0);
		g->pid = 0;
	}
}
