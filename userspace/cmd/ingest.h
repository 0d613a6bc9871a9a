/* SPDX-License-Identifier: MIT */
/* Delivery to Pyroscope's HTTP ingest API (pyroscope.h) through libcurl: a sender
 * thread takes the spool's oldest profile, POSTs it, and removes it once the server
 * said 2xx; so profiles arrive in order, each once (a kill between the answer and the
 * removal sends that one again after the restart). What is not accepted waits:
 *   network errors, timeouts, 408, 429, 5xx   retried after 1 s, 2 s, 4 s ... up to
 *                                             the retry cap, with jitter
 *   401, 403 (the token), 404 (the URL), TLS  a configuration problem: one clear line,
 *                                             retried after 30 s, 60 s ... up to the cap
 *                                             (the token file is read again each time)
 *   any other 4xx                             the profile itself is refused and never will
 *                                             be accepted: it is dropped and counted
 * A bearer token comes from a file; https verifies the server (system CAs or --ca-file). */
#ifndef GPUBPF_INGEST_H
#define GPUBPF_INGEST_H

#include "agent.h"
#include "spool.h"

struct ingest_opts {
	const char *server;	/* http[s]://host[:port][/prefix] */
	const char *token_file; /* or NULL */
	const char *ca_file;	/* or NULL */
	double retry_max;	/* longest wait between attempts, seconds */
};

struct ingest;

/* Check the options (the URL, the token file), then start the sender thread over SP. NULL
 * with errno set; a message was printed. */
struct ingest *ingest__start(const struct ingest_opts *o, struct spool *sp, struct agent_stats *st);

/* A profile was spooled. */
void ingest__kick(struct ingest *in);

/* Deliver what waits for at most FLUSH_S seconds, then stop the thread; the rest stays
 * spooled for the next start. Frees IN (accepts NULL). */
void ingest__stop(struct ingest *in, double flush_s);

/* Read a bearer token: one line of printable ASCII, at most 4095 bytes. 0 or a negative
 * errno (-EINVAL: empty or not printable). */
int ingest__read_token(const char *path, char *buf, size_t cap);

#endif /* GPUBPF_INGEST_H */
