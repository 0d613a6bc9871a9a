/* SPDX-License-Identifier: MIT */
/* Pyroscope's HTTP ingest contract, as its server implements it (grafana/pyroscope:
 * pkg/ingester/pyroscope/ingest_handler.go, api/model/labelset, pkg/validation):
 *
 *   POST /ingest?name=SERVICE{k=v,...}&from=UNIX&until=UNIX&spyName=...&sampleRate=HZ
 *   Content-Type: multipart/form-data; the gzipped pprof in the file field "profile".
 *
 * The server reads a body as multipart only when `format` is not "pprof": with
 * format=pprof it takes the whole body for the pprof itself. So the query has no format.
 * SERVICE may hold [A-Za-z0-9_.-/]; a label name [A-Za-z_][A-Za-z0-9_]* (no leading
 * "__": private); a label value ends at ',' or '}' and is trimmed of spaces. Pure
 * functions: unit-tested. */
#ifndef GPUBPF_PYROSCOPE_H
#define GPUBPF_PYROSCOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PYRO_MAX_VALUE 255   /* label values are cut here (the server allows 2048) */
#define PYRO_MAX_SERVICE 127 /* service names too */

struct pyro_label {
	const char *key;
	const char *value;
};

/* A label name the server keeps as it is (no sanitizing, not private). */
bool pyro__valid_label_name(const char *k);

/* IN made into a label value: control and non-ASCII bytes and the ones the name syntax
 * reserves (, { } = and quotes, backslash) become '_', outer spaces go; at most
 * PYRO_MAX_VALUE bytes. OUT has CAP bytes (CAP > 0). Returns the length (0: empty). */
size_t pyro__clean_value(char *out, size_t cap, const char *in);

/* IN made into a service name: bytes outside [A-Za-z0-9_.-/] become '_'; empty gives
 * "unknown". Returns the length. */
size_t pyro__clean_service(char *out, size_t cap, const char *in);

/* "SERVICE{k=v,...}" from clean parts (labels with an empty value are left out), in
 * the order given. 0, -EINVAL (a name or value that is not clean) or -ENOSPC. */
int pyro__name(char *buf, size_t cap, const char *service, const struct pyro_label *l, int n);

/* Percent-encode everything but RFC 3986's unreserved characters. 0 or -ENOSPC. */
int pyro__urlencode(char *buf, size_t cap, const char *in);

/* The query string of one upload (no leading '?'). FROM and UNTIL are Unix seconds. 0 or
 * -ENOSPC. */
int pyro__query(char *buf, size_t cap, const char *name, int64_t from, int64_t until, int sample_rate);

/* SERVER ("http[s]://host[:port][/prefix]", trailing '/' ignored) + "/ingest?" + QUERY.
 * 0, -EINVAL (not http or https) or -ENOSPC. */
int pyro__url(char *buf, size_t cap, const char *server, const char *query);

#endif /* GPUBPF_PYROSCOPE_H */
