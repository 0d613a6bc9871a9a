/* SPDX-License-Identifier: MIT */
/* What the watcher asks of the device side: attach, detach, flush. */
#ifndef GPUBPF_INJECT_BACKEND_H
#define GPUBPF_INJECT_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "inject.h"

struct inj_backend {
	/* Returns enum dev_status (DEV_ST_ATTACHED, or why it stays idle, said in WHY). */
	int (*attach)(struct inj_state *s, char *why, size_t len);
	/* PROCESS_EXIT: from the exit handler (no driver call then), else the job runs on */
	void (*detach)(bool process_exit);
	void (*flush)(void); /* deliver completed records now */
	/* While attached: callbacks (INJ_CB) and activity (INJ_ACT) on or off, for device
	 * time in windows (devwin.c). Attach turns both on (in windows: callbacks only).
	 * Returns false while the state is not yet WANT (CUPTI is being torn down after a
	 * window, or could not be set up again): the watcher asks again soon. */
	bool (*set)(int want);
	/* Attached, in windows, on the watcher once the job has launched (its driver is up):
	 * CUPTI's own work to call back one driver call, enter and exit, in ns
	 * (dev_costs.pair_ns); 0 where it cannot be now. May be NULL. */
	uint32_t (*dispatch_pair)(void);
};

extern const struct inj_backend inj_cupti_backend;
extern const struct inj_backend inj_synthetic_backend;
extern struct inj_state inj;

#endif /* GPUBPF_INJECT_BACKEND_H */
