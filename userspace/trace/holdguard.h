/* SPDX-License-Identifier: MIT */
/* Undoing the holds of a started command. bpf/procs.bpf.c stops the command gpubpf
 * started (SIGSTOP at exec and at each load of the dynamic linker) until its new objects
 * are probed, and notes every stop in its `held` map. A stop must always be undone:
 * gpubpf resumes each held process after probing it and all of them on every exit path;
 * and, because a killed gpubpf can do nothing, a guardian process that holds the two
 * maps and outlives gpubpf resumes them when gpubpf's end of a pipe closes without the
 * word that it finished cleanly. */
#ifndef GPUBPF_HOLDGUARD_H
#define GPUBPF_HOLDGUARD_H

#include <sys/types.h>

struct holdguard {
	pid_t pid;  /* the guardian, or 0 */
	int ctl_fd; /* our end of its pipe, or -1 */
};

/* Stop holding: empty PAUSE_FD (no process is stopped from now on) and resume every
 * process in HELD_FD. Returns how many there were. Safe to call at any time, any number
 * of times.
 *
 * Entries of HELD_FD are never deleted on a resume: the key is the pid, and BPF may
 * record the process's next hold under it the moment it runs on, so a delete after the
 * SIGCONT could erase that newer hold, and one before it would leave nothing to find if
 * gpubpf died in between. A pid in HELD_FD is therefore "maybe held": resuming one that
 * runs already costs nothing (SIGCONT to a running process does nothing). */
int holdguard__resume_all(int pause_fd, int held_fd);

/* Resume one held process. */
void holdguard__resume(pid_t pid);

/* Forget a process that exited: it is held no more, and its pid may be reused. */
void holdguard__forget(int held_fd, pid_t pid);

/* Fork the guardian; it keeps only PAUSE_FD, HELD_FD and its pipe. 0 or negative errno. */
int holdguard__start(struct holdguard *g, int pause_fd, int held_fd);

/* Tell the guardian gpubpf ends cleanly (nothing is held any more) and reap it. */
void holdguard__stop(struct holdguard *g);

#endif /* GPUBPF_HOLDGUARD_H */
