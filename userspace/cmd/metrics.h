/* SPDX-License-Identifier: MIT */
/* --metrics: the agent's counters as Prometheus text (GET /metrics), on 127.0.0.1 or
 * [::1] only: nothing else can be asked to listen. One request at a time, each bounded
 * in size and time, on a thread of its own. */
#ifndef GPUBPF_METRICS_H
#define GPUBPF_METRICS_H

#include <stddef.h>

#include "agent.h"

struct metrics;

/* Parse "[127.0.0.1:|localhost:|[::1]:]PORT": 0, or -EINVAL for anything that is not
 * a loopback address (a message was printed). */
int metrics__parse(const char *arg, int *family, int *port);

/* Listen and serve ST. NULL with errno set (a message was printed). */
struct metrics *metrics__start(const char *arg, struct agent_stats *st);
void metrics__stop(struct metrics *m); /* accepts NULL */

/* The text a scrape gets, into BUF. Returns its length. */
size_t metrics__format(const struct agent_stats *st, char *buf, size_t cap);

#endif /* GPUBPF_METRICS_H */
