// SPDX-License-Identifier: MIT
/* Member offsets from BTF (userspace/trace/kbtf.c): a BTF built here with the shapes the
 * kernel's task_struct uses (anonymous unions and structs, typedefs, an embedded struct),
 * then the running kernel's own, whose fields BPF reads with these offsets. */
#include <errno.h>
#include <unistd.h>

#include <bpf/btf.h>

#include "kbtf.h"
#include "test.h"

/* struct thread_struct { long sp; unsigned long fsbase; };
 * typedef struct thread_struct thread_t;
 * struct task_struct {
 *	int state;                          @0
 *	union { int a; struct { long b; struct task_struct *group_leader; }; };  @8, leader @16
 *	char comm[16];                      @24
 *	const thread_t thread;              @40, fsbase @48
 *	struct sched_entity se;             @56, sum_exec_runtime @64
 *	unsigned long start_time;           @72
 *	int pid;                            @80
 *	int tgid;                           @84
 * }; */
static struct btf *sample(void)
{
	struct btf *b = btf__new_empty();
	int i_int, i_long, i_ulong, i_char, th, cth, ptask, arr, anon_s, anon_u, se;

	if (!b)
		return NULL;
	i_int = btf__add_int(b, "int", 4, BTF_INT_SIGNED);
	i_long = btf__add_int(b, "long", 8, BTF_INT_SIGNED);
	i_ulong = btf__add_int(b, "unsigned long", 8, 0);
	i_char = btf__add_int(b, "char", 1, BTF_INT_CHAR);
	th = btf__add_struct(b, "thread_struct", 16);
	btf__add_field(b, "sp", i_long, 0, 0);
	btf__add_field(b, "fsbase", i_ulong, 64, 0);
	cth = btf__add_const(b, btf__add_typedef(b, "thread_t", th));
	ptask = btf__add_ptr(b, btf__add_fwd(b, "task_struct", BTF_FWD_STRUCT));
	arr = btf__add_array(b, i_int, i_char, 16);
	anon_s = btf__add_struct(b, NULL, 16);
	btf__add_field(b, "b", i_long, 0, 0);
	btf__add_field(b, "group_leader", ptask, 64, 0);
	anon_u = btf__add_union(b, NULL, 16);
	btf__add_field(b, "a", i_int, 0, 0);
	btf__add_field(b, NULL, anon_s, 0, 0);
	se = btf__add_struct(b, "sched_entity", 16);
	btf__add_field(b, "load", i_long, 0, 0);
	btf__add_field(b, "sum_exec_runtime", i_ulong, 64, 0);
	btf__add_struct(b, "task_struct", 88);
	btf__add_field(b, "state", i_int, 0, 0);
	btf__add_field(b, NULL, anon_u, 64, 0);
	btf__add_field(b, "comm", arr, 192, 0);
	btf__add_field(b, "thread", cth, 320, 0);
	btf__add_field(b, "se", se, 448, 0);
	btf__add_field(b, "start_time", i_ulong, 576, 0);
	btf__add_field(b, "pid", i_int, 640, 0);
	btf__add_field(b, "tgid", i_int, 672, 0);
	return b;
}

TEST(synthetic_btf)
{
	struct btf *b = sample();
	struct task_offsets off;
	int task, member = 0;

	CHECK(b != NULL);
	if (!b)
		return;
	task = btf__find_by_name_kind(b, "task_struct", BTF_KIND_STRUCT);
	CHECK(task > 0);
	CHECK(kbtf__member_offset(b, task, "nope", NULL) == -ENOENT);
	CHECK(kbtf__member_offset(b, task, "comm", NULL) == 24);
	CHECK(kbtf__member_offset(b, task, "group_leader", NULL) == 16); /* through a union and a struct */
	CHECK(kbtf__member_offset(b, task, "a", NULL) == 8);
	CHECK(kbtf__member_offset(b, task, "thread", &member) == 40);
	CHECK(member > 0 && kbtf__member_offset(b, member, "fsbase", NULL) == 8); /* const, typedef resolved */
	CHECK(kbtf__task_offsets_from(b, &off) == 0);
	CHECK(off.group_leader == 16 && off.comm == 24 && off.fsbase == 48);
	CHECK_INT(off.runtime, 64); /* se's offset plus sum_exec_runtime's in it */
	CHECK_INT(off.start_time, 72);
	CHECK(off.pid == 80 && off.tgid == 84);
	CHECK(off.perf_event == 0 && off.perf_target == 0); /* no perf_event types in it: unknown */
	CHECK(off.signal == 0 && off.signal_live == 0);	    /* nor signal_struct */
	btf__free(b);
}

TEST(running_kernel)
{
	struct task_offsets off;

	if (access("/sys/kernel/btf/vmlinux", R_OK) != 0)
		SKIP("no /sys/kernel/btf/vmlinux: the kernel has no BTF");
	CHECK(kbtf__task_offsets(&off) == 0);
	/* comm is 16 bytes and group_leader a pointer: neither overlaps the other */
	CHECK(off.comm > 0 && off.group_leader > 0);
	CHECK(off.comm + 16 <= off.group_leader || off.group_leader + 8 <= off.comm);
	CHECK(off.group_leader % 8 == 0);
#if defined(__x86_64__)
	CHECK(off.fsbase > 0 && off.fsbase % 8 == 0);
#endif
	/* nvcsw (unsigned long) is found, aligned, and not comm */
	CHECK(off.nvcsw > 0 && off.nvcsw % 8 == 0 && (off.nvcsw + 8 <= off.comm || off.comm + 16 <= off.nvcsw));
	/* ... and nivcsw, declared right after it in every kernel since 2.6 */
	CHECK_INT(off.nivcsw, off.nvcsw + 8);
	/* utime and stime (u64 ns each) are both found, aligned and apart */
	CHECK(off.utime > 0 && off.stime > 0 && off.utime % 8 == 0 && off.stime % 8 == 0 && off.utime != off.stime);
	/* se.sum_exec_runtime (u64 ns, in an embedded struct) and start_time: aligned, apart
	 * from each other and from utime */
	CHECK(off.runtime > 0 && off.runtime % 8 == 0 && off.start_time > 0 && off.start_time % 8 == 0);
	CHECK(off.runtime != off.start_time && off.runtime != off.utime && off.start_time != off.utime);
	/* sched_info.run_delay (u64 ns, in an embedded struct), where the kernel keeps it
	 * (CONFIG_SCHED_INFO: /proc/PID/schedstat's second field) */
	if (access("/proc/self/schedstat", R_OK) == 0)
		CHECK(off.run_delay > 0 && off.run_delay % 8 == 0 && off.run_delay != off.runtime &&
		      off.run_delay != off.utime && off.run_delay != off.nvcsw);
	/* a CPU sample's event: bpf_perf_event_data_kern's third pointer (after regs and
	 * data), and hw.target, a pointer in perf_event well past its list heads */
	CHECK_INT(off.perf_event, 16);
	/* pid and tgid (pid_t each), next to each other; signal a pointer, live in it an int */
	CHECK_INT(off.tgid, off.pid + 4);
	CHECK(off.signal > 0 && off.signal % 8 == 0 && off.signal_live > 0 && off.signal_live % 4 == 0);
	CHECK(off.perf_target > 64 && off.perf_target % 8 == 0);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(synthetic_btf);
	RUN(running_kernel);
	return T_END();
}
