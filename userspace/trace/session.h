/* SPDX-License-Identifier: MIT */
/* What every data source of a recording shares: the options, the profile model, the
 * symbolizer, the target processes, and the sample types. Each source (cpu.c, later
 * cuda.c) drains its BPF maps into session->prof through these helpers. */
#ifndef GPUBPF_SESSION_H
#define GPUBPF_SESSION_H

#include <signal.h>
#include <stdint.h>

#include "../../bpf/procs.h"
#include "opts.h"
#include "profile.h"
#include "syms.h"

struct procs;
struct python;

struct session {
	const struct record_opts *opts;
	struct profile *prof;
	struct syms *syms;
	struct procs *procs;
	struct python *py; /* Python frames (python.c), or NULL: --no-python or not set up */
	int comms_fd;	   /* BPF map tid -> struct gpubpf_comm */
	int t_samples;	   /* sample type indices in prof */
	int t_cpu_ns;
	int t_cuda_calls;
	int t_cuda_launches;
	int t_cuda_memcpy;
	int t_cuda_sync_ns;
	int t_gpu_alloc;
	int t_gpu_inuse;
	int t_gpu_kernel_ns; /* device-side kernel time (cupti.c) */
	int t_gpu_memcpy_ns; /* device-side copy and memset time (cupti.c) */
	int64_t period_ns;
	uint64_t truncated_stacks; /* stacks that hit STACKS_MAX_DEPTH */
	/* The kernel a launch handle stands for, from the injection library (cupti.c) to the
	 * CUDA tracer that names launches (cuda.c); NULL until the tracer sets it. */
	void (*kernel_name)(void *ctx, uint32_t tgid, uint64_t handle, const char *mangled);
	void *kernel_name_ctx;
	/* launches drained whose handle had no name yet ([cuda kernel 0x...]): device time in
	 * windows keeps the library's callbacks on between windows while this grows, so the
	 * handles get named (cupti_win.c) */
	uint64_t unnamed_launches;
	uint64_t kernel_launches;     /* ... of all launches drained (their kernel frame made) */
	struct task_offsets task_off; /* kbtf.c: read-only data of every BPF object */
};

/* The read-only data every tracer's BPF object has (bpf/targets.bpf.h): set it in the
 * opened skeleton's RODATA before load. */
#define SESSION_SET_RODATA(rodata, s)                                                                                  \
	do {                                                                                                           \
		(rodata)->trace_all = (s)->opts->all;                                                                  \
		(rodata)->self_tgid = (__u32)getpid();                                                                 \
		(rodata)->task_off = (s)->task_off;                                                                    \
	} while (0)

/* Make OBJ (opened, not loaded) use the session's one target set and comms map, and the
 * Python maps when it has them. 0 or a negative errno. */
struct bpf_object;
int session__share_maps(struct session *s, struct bpf_object *obj, int targets_fd, int comms_fd);

#define SESSION_LABELS 4

/* Fill the standard labels of a sample (pid, tid, thread_name, process_name). Strings
 * point into a cache owned by the session module; valid until session__names_free(). */
int session__labels(struct session *s, uint32_t pid, uint32_t tid, struct prof_label *labels);
/* The same with the names the thread had when sampled: NAMES is the hash BPF's
 * record_comm() returned then (0: the latest names). */
int session__labels_at(struct session *s, uint32_t pid, uint32_t tid, uint32_t names, struct prof_label *labels);
void session__names_free(void);

/* The sample's values array, zeroed, sized for every type of the profile. */
#define SESSION_VALUES(name) int64_t name[PROFILE_MAX_TYPES] = {0}

/* Build frames from a kernel and a user stack (leaf first each; either may be empty)
 * and add one sample. Non-leaf return addresses are moved back by one byte so they
 * resolve to the call instruction's line (ips[0] of each stack is left as is). A sample with no frames at all gets a
 * synthetic "[stack lost]" frame so its value is still counted. */
int session__add_stack_sample(struct session *s, uint32_t pid, uint32_t tid, const uint64_t *kips, int nk,
			      const uint64_t *uips, int nu, const struct prof_frame *leaf, int nleaf,
			      const struct prof_label *extra, int nextra, const int64_t *values);

/* The same with the thread's names when sampled (NAMES, as for session__labels_at) and
 * its Python frames (an id in py_stacks, or -1) merged into the user stack by
 * python__frames(); without s->py or a Python stack, exactly the above. */
int session__add_stack_sample_py(struct session *s, uint32_t pid, uint32_t tid, uint32_t names, const uint64_t *kips,
				 int nk, const uint64_t *uips, int nu, int32_t pystack, const struct prof_frame *leaf,
				 int nleaf, const struct prof_label *extra, int nextra, const int64_t *values);

#endif /* GPUBPF_SESSION_H */
