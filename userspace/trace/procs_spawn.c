// SPDX-License-Identifier: MIT
/* The command gpubpf starts (record -- CMD): forked, held at a gate until the probes are
 * in, then let go to exec; its exit status for gpubpf's own (procs.h). */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "procs_int.h"
#include "procs.skel.h"

int procs__spawn(struct procs *p, char **argv)
{
	int gate[2] = {-1, -1}, errp[2] = {-1, -1}, err;
	pid_t pid;

	/* Before anything can be held: if gpubpf dies, the guardian resumes what it held. */
	if (!p->guard.pid) {
		err =
		    holdguard__start(&p->guard, bpf_map__fd(p->skel->maps.pause_pids), bpf_map__fd(p->skel->maps.held));
		if (err)
			return err;
	}
	if (pipe2(gate, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
		err = -errno;
		goto fail;
	}
	pid = fork();
	if (pid < 0) {
		err = -errno;
		goto fail;
	}
	if (pid == 0) {
		char c;
		int e;
		sigset_t none;

		close(gate[1]);
		close(errp[0]);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGPIPE, SIG_DFL);
		/* Wait at the gate: the parent closes it once the probes are in place. */
		while (read(gate[0], &c, 1) < 0 && errno == EINTR)
			;
		execvp(argv[0], argv);
		e = errno;
		if (write(errp[1], &e, sizeof(e)) < 0)
			_exit(127);
		_exit(127);
	}
	close(gate[0]);
	close(errp[1]);
	p->gate_fd = gate[1];
	p->error_fd = errp[0];
	p->child = pid;
	err = procs_set_target(p, pid, TARGET_ROOT | TARGET_PREEXEC);
	if (err)
		return err;
	{
		__u32 key = (__u32)pid, one = 1;

		/* Ours to hold: stopped at exec and at loads until its objects are probed. */
		bpf_map_update_elem(bpf_map__fd(p->skel->maps.pause_pids), &key, &one, BPF_ANY);
	}
	if (!procs_add_ent(p, pid, true))
		return -ENOMEM;
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (gate[i] >= 0)
			close(gate[i]);
		if (errp[i] >= 0)
			close(errp[i]);
	}
	return err;
}

int procs__release(struct procs *p)
{
	ssize_t n;
	int e = 0;

	if (p->gate_fd < 0)
		return 0;
	close(p->gate_fd);
	p->gate_fd = -1;
	do
		n = read(p->error_fd, &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	close(p->error_fd);
	p->error_fd = -1;
	if (n == (ssize_t)sizeof(e)) {
		waitpid(p->child, &p->child_status, 0);
		p->child_reaped = true;
		return -e;
	}
	/* EOF: the exec succeeded (the pipe was close-on-exec). Mappings are final now. */
	procs_track(p, p->child);
	return 0;
}

bool procs__released(const struct procs *p)
{
	return !p || p->gate_fd < 0;
}

pid_t procs__child(const struct procs *p)
{
	return p->child;
}

int procs__child_status(struct procs *p, int *status)
{
	struct proc_ent *e = p->child > 0 ? procs_find(p, p->child) : NULL;

	/* Reaped already, or a zombie now, whatever the events said: a command killed by the
	 * group's Ctrl-C before its exit event was read (a stop cuts the drain short) read
	 * as running on, with gpubpf's exit 0. */
	if (p->child > 0 && !p->child_reaped && p->gate_fd < 0 &&
	    waitpid(p->child, &p->child_status, WNOHANG) == p->child)
		p->child_reaped = true;
	/* The exit tracepoint fires before the child becomes a zombie: when it said the
	 * child is gone, give it a moment to become reapable. */
	for (int i = 0; e && !e->alive && !p->child_reaped && i < 100; i++) {
		if (waitpid(p->child, &p->child_status, WNOHANG) == p->child)
			p->child_reaped = true;
		else
			usleep(5000);
	}
	if (!p->child_reaped)
		return -EAGAIN;
	*status = p->child_status;
	return 0;
}
