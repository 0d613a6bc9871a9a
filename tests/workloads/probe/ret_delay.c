// SPDX-License-Identifier: MIT
/* ret_delay: what one uprobe hit costs a running job, timed by the job's own pace.
 *
 * usage: ret_delay [--seconds S] [--every N] [--walk] PID OBJECT SYMBOL
 *
 * Puts a uprobe session (Linux 6.13+) on SYMBOL of OBJECT in process PID for S seconds
 * (default 5). Its program runs at every call's entry; on one call in N (default 8), at
 * random, it asks for the call's return as well (a return hit: a trap and a short
 * program), and on another it holds the thread 500 ns in the kernel (a stall: no trap,
 * no return to the job's code in between). The gap from each call's entry to the
 * thread's next is booked by what the first call had, leaving out gaps with a context
 * switch in them, over 1 ms, or over 4 times the thread's mean. The gaps after a return
 * hit are longer than the others by what that hit cost the job, as far as a delay there
 * pushes the next call out; the gaps after a stall by the stall, as far. The ratio of the
 * two is the return hit's whole cost in ns of a stall's: its trap, its program, and what
 * the job's own code paid after the trap (caches and predictors refilled), whatever sets
 * the thread's pace. gpubpf times the program, calibrates the trap at start-up in a loop of
 * its own, and cannot see the last part (docs/DESIGN.md, "A hit also costs the job's own
 * code"); this measures all three in the job. With --walk every call's entry also walks
 * the user stack (bpf_get_stack), as gpubpf's probes do, but for one call in N at random:
 * the gaps after that one are shorter by the walk's whole cost to the job (its run time,
 * and what the job's code paid after it for what it touched).
 *
 * Prints one line "ret_delay: key=value ...": gaps (plain, after_ret, after_stall),
 * delta_ret_ns and delta_stall_ns (mean gap after one less after none; +- 95%),
 * stall_ns (what a stall added to the entry program: the stalled calls' run time less
 * the plain ones'), response (delta_stall over it), ret_hit_ns (delta_ret over the
 * response) with its 95% range (ret_hit_lo_ns, ret_hit_hi_ns), ret_prog_ns (the return
 * program as timed in it), entry_prog_ns (a plain call's entry program), and
 * stall_clock_ns (the stall by its own clock, from its first read to its last: short of
 * stall_ns by bpf_loop's start and end, as gpubpf's stalls were until they were timed
 * around); with --walk a second "ret_delay:" line: after_skip, walk_prog_ns (the walk's
 * run time: a plain call's entry program less a skipped one's) and walk_whole_ns (the
 * gaps' difference over the response) with its range (walk_whole_lo_ns, _hi_ns).
 * Exit 0; 1 on an error; 3 where the kernel has no uprobe session (said on stderr). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "elfsym.h"
#include "ret_delay.skel.h"

/* enum bpf_attach_type's BPF_TRACE_UPROBE_SESSION (uapi, Linux 6.13); the system's
 * headers are older. */
#define RD_UPROBE_SESSION 57

/* union bpf_attr's link_create with its uprobe_multi part, as the kernel lays it out
 * (libbpf 1.4's bpf_link_create() passes uprobe_multi only for BPF_TRACE_UPROBE_MULTI). */
struct rd_link_attr {
	uint32_t prog_fd, target_fd, attach_type, flags;
	uint64_t path, offsets, ref_ctr_offsets, cookies;
	uint32_t cnt, multi_flags, pid;
	uint32_t pad[9];
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* Mean difference of class J's gaps over class 0's, and the half-width of its 95% range. */
static double delta(const struct ret_delay_bpf__bss *b, int j, double *ci)
{
	double m[2], v[2];
	int cls[2] = {0, j};

	for (int i = 0; i < 2; i++) {
		double n = (double)b->gap_n[cls[i]];

		m[i] = n ? (double)b->gap_ns[cls[i]] / n : 0;
		v[i] = n > 1 ? ((double)b->gap_sq[cls[i]] / n - m[i] * m[i]) / n : 0;
	}
	*ci = 1.96 * sqrt(v[0] + v[1]);
	return m[1] - m[0];
}

static int attach(struct ret_delay_bpf *o, const char *object, const char *symbol, int pid)
{
	struct elfsym_want want = {.name = symbol};
	struct rd_link_attr a = {0};
	uint64_t off = 0, cookie = 0;
	int fd = open(object, O_RDONLY | O_CLOEXEC), err;

	if (fd < 0)
		return -errno;
	err = elfsym__lookup_fd(fd, &want, 1);
	if (err == 1)
		err = want.offset ? 0 : -ENOENT;
	else if (err >= 0)
		err = -ENOENT;
	close(fd);
	if (err)
		return err;
	off = want.offset;
	a.prog_fd = (uint32_t)bpf_program__fd(o->progs.ret_delay);
	a.attach_type = RD_UPROBE_SESSION;
	a.path = (uint64_t)(uintptr_t)object;
	a.offsets = (uint64_t)(uintptr_t)&off;
	a.cookies = (uint64_t)(uintptr_t)&cookie;
	a.cnt = 1;
	a.pid = (uint32_t)pid;
	fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));
	return fd < 0 ? -errno : fd;
}

int main(int argc, char **argv)
{
	double seconds = 5, dr, ds, cr, cs, stall, resp, hit, lo, hi, prog[4];
	unsigned every = 8;
	bool walk = false;
	struct ret_delay_bpf *o = NULL;
	struct ret_delay_bpf__bss *b;
	struct btf *vmlinux;
	int i = 1, pid, link = -1, err = 0;

	for (; i < argc && !strncmp(argv[i], "--", 2); i++) {
		if (!strcmp(argv[i], "--walk"))
			walk = true;
		else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--every") && i + 1 < argc)
			every = (unsigned)atoi(argv[++i]);
		else
			break;
	}
	if (argc - i != 3 || !(seconds > 0) || every < 4 || (pid = atoi(argv[i])) <= 0) {
		fprintf(stderr, "usage: ret_delay [--seconds S] [--every N>=4] [--walk] PID OBJECT SYMBOL\n");
		return 1;
	}
	/* the kernel has uprobe sessions where its BTF has their kfunc */
	vmlinux = btf__load_vmlinux_btf();
	if (!vmlinux || btf__find_by_name_kind(vmlinux, "bpf_session_is_return", BTF_KIND_FUNC) < 0) {
		fprintf(stderr, "ret_delay: no uprobe session on this kernel (Linux 6.13+ with BTF)\n");
		btf__free(vmlinux);
		return 3;
	}
	btf__free(vmlinux);
	o = ret_delay_bpf__open();
	if (!o) {
		fprintf(stderr, "ret_delay: cannot open the BPF object: %s\n", strerror(errno));
		return 1;
	}
	o->rodata->every = every;
	o->rodata->walk = walk;
	bpf_program__set_expected_attach_type(o->progs.ret_delay, (enum bpf_attach_type)RD_UPROBE_SESSION);
	err = ret_delay_bpf__load(o);
	if (!err) {
		link = attach(o, argv[i + 1], argv[i + 2], pid);
		err = link < 0 ? link : 0;
	}
	if (err) {
		fprintf(stderr, "ret_delay: %s in %s of pid %d: %s\n", argv[i + 2], argv[i + 1], pid, strerror(-err));
		ret_delay_bpf__destroy(o);
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	for (double t = 0; t < seconds && !stop && !kill(pid, 0); t += 0.05)
		usleep(50000);
	close(link);
	b = o->bss;
	dr = delta(b, 1, &cr);
	ds = delta(b, 2, &cs);
	/* what a stall held the thread: the stalled calls' entry program less the others' */
	for (int j = 0; j < 4; j++)
		prog[j] = b->entry_n[j] ? (double)b->entry_ns[j] / (double)b->entry_n[j] : 0;
	stall = prog[2] - prog[0];
	resp = stall > 0 ? ds / stall : 0;
	hit = resp > 0 ? dr / resp : 0;
	/* the ratio's range: both ends of each difference (they are independent) */
	lo = ds + cs > 0 && stall > 0 ? (dr - cr) / ((ds + cs) / stall) : 0;
	hi = ds - cs > 0 && stall > 0 ? (dr + cr) / ((ds - cs) / stall) : 0;
	printf("ret_delay: pid=%d symbol=%s calls=%llu cut=%llu gaps=%llu after_ret=%llu after_stall=%llu "
	       "delta_ret_ns=%.1f+-%.1f delta_stall_ns=%.1f+-%.1f stall_ns=%.1f response=%.3f ret_hit_ns=%.1f "
	       "ret_hit_lo_ns=%.1f ret_hit_hi_ns=%.1f ret_prog_ns=%.1f entry_prog_ns=%.1f stall_clock_ns=%.1f\n",
	       pid, argv[i + 2], (unsigned long long)b->calls, (unsigned long long)b->cut,
	       (unsigned long long)b->gap_n[0], (unsigned long long)b->gap_n[1], (unsigned long long)b->gap_n[2], dr,
	       cr, ds, cs, stall, resp, hit, lo, hi, b->ret_hits ? (double)b->ret_ns / (double)b->ret_hits : 0, prog[0],
	       b->stalls ? (double)b->stall_sum_ns / (double)b->stalls : 0);
	if (walk) {
		double dw, cw, walk_prog = prog[0] - prog[3];

		/* the gaps after a skipped walk are shorter: their difference is negative */
		dw = -delta(b, 3, &cw);
		printf("ret_delay: after_skip=%llu walk_prog_ns=%.1f walk_whole_ns=%.1f walk_whole_lo_ns=%.1f "
		       "walk_whole_hi_ns=%.1f\n",
		       (unsigned long long)b->gap_n[3], walk_prog, resp > 0 ? dw / resp : 0,
		       ds + cs > 0 && stall > 0 ? (dw - cw) / ((ds + cs) / stall) : 0,
		       ds - cs > 0 && stall > 0 ? (dw + cw) / ((ds - cs) / stall) : 0);
	}
	ret_delay_bpf__destroy(o);
	return 0;
}
