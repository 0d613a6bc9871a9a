/* SPDX-License-Identifier: MIT */
/* libgpubpf_inject.so internals. records.c is the CUPTI-free core (sampling decisions,
 * the sampled-correlation set, record conversion and batching, name interning), unit
 * tested on its own; core.c owns the USDT probes, the watcher thread and the entry
 * points; cupti_backend.c talks to CUPTI (dlopened at attach, never while idle). */
#ifndef GPUBPF_INJECT_H
#define GPUBPF_INJECT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../bpf/cupti.h"

/* API callbacks gpubpf follows, by what they start on the device. */
enum inj_api_class {
	INJ_API_NONE = 0,
	INJ_API_LAUNCH = 1, /* kernel launches */
	INJ_API_GRAPH = 2,  /* graph launches: every node's record carries this correlation id */
	INJ_API_COPY = 3,   /* memcpy and memset */
};

/* Classify a CUPTI callback by its function name (cuptiGetCallbackName), so new
 * versioned entry points (cudaLaunchKernel_v7000, cuLaunchKernelEx_ptsz, ...) are
 * followed without a table per CUDA release. */
enum inj_api_class inj_classify(const char *name);

/* A device activity as CUPTI reported it, whatever the record's version. */
struct inj_activity {
	uint32_t kind; /* enum dev_kind; anything else is ignored */
	uint32_t corr;
	uint64_t start, end;
	uint32_t device, stream, graph_id;
	uint32_t cupti_copy_kind; /* CUpti_ActivityMemcpyKind */
	uint64_t bytes;
	const char *name; /* kernels: CUPTI's name string (shared by every record of a kernel) */
};

/* Where records.c sends what it produced (the USDT probes, or a unit test's recorder). */
struct inj_ops {
	void (*launch)(uint32_t corr, uint32_t cbinfo);
	void (*batch)(const struct dev_batch *b);
	void (*name)(uint32_t id, const char *name);
	/* the kernel a launch handle (host stub, cudaKernel_t, CUfunction) stands for */
	void (*kname)(uint64_t handle, const char *name);
};

#define INJ_SAMPLED_SLOTS 65536 /* outstanding sampled correlation ids remembered */
#define INJ_NAMES_MAX 16384
#define INJ_API_SLOTS 2048    /* (domain & 1) << 10 | cbid & 1023: announced API names */
#define INJ_HANDLE_SLOTS 8192 /* launch handles whose kernel name was announced */

struct inj_name {
	const char *ptr;
	uint32_t id;
	uint32_t epoch; /* announced in this attach generation */
};

struct inj_state {
	struct inj_ops ops;
	/* Sampling, set by the watcher: follow 1 in every_n calls while the window is open. */
	uint32_t every_n;
	bool window_open;
	uint32_t epoch;
	uint32_t sampled[INJ_SAMPLED_SLOTS]; /* corr stored at corr % slots: "corr was followed" */
	uint32_t api_epoch[INJ_API_SLOTS];
	/* (handle, epoch) announced; open addressing, claimed under lock, read without */
	uint64_t handle_key[INJ_HANDLE_SLOTS];
	uint32_t handle_epoch[INJ_HANDLE_SLOTS];
	struct dev_counters ctr; /* updated with atomics */
	/* Under lock: batch and names (buffer callbacks may come from two threads). */
	pthread_mutex_t lock;
	struct dev_batch *batch;
	struct inj_name names[INJ_NAMES_MAX];
	uint32_t next_name;
};

/* 0 or -ENOMEM. */
int inj_state_init(struct inj_state *s, const struct inj_ops *ops);
void inj_state_fini(struct inj_state *s);
/* A new attach: names and API functions are announced again. */
void inj_new_epoch(struct inj_state *s);

/* A launch's handle and the kernel's name (CUPTI's symbolName): announced once per
 * handle and attach, for every launch, followed or not, so that gpubpf names the launches
 * its probes count by the handle they pass. */
void inj_announce_handle(struct inj_state *s, uint64_t handle, const char *name);

/* API callbacks (enter and exit of each followed call, on the calling thread). Nested
 * calls (the runtime calling the driver) follow the outer call's decision. */
void inj_api_enter(struct inj_state *s, enum inj_api_class cls, uint32_t domain, uint32_t cbid, uint32_t corr,
		   const char *func_name);
void inj_api_exit(struct inj_state *s);
bool inj_is_sampled(const struct inj_state *s, uint32_t corr);

/* Activity records: kept (1) when their launch was followed, else dropped and counted (0);
 * -EINVAL for a kind gpubpf does not follow. inj_flush sends what is batched. Both lock. */
int inj_add_activity(struct inj_state *s, const struct inj_activity *a);
void inj_flush(struct inj_state *s);
void inj_count_lost(struct inj_state *s, uint64_t n);

/* CUpti_ActivityMemcpyKind -> DEV_DIR_*. */
uint32_t inj_copy_dir(uint32_t cupti_kind);

#endif /* GPUBPF_INJECT_H */
