// SPDX-License-Identifier: MIT
/* Chrome trace-event JSON read back (jansson): gpubpf's own traces into the event
 * list, and any trace checked against the format's rules (the validator). */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "pprof_read.h"
#include "trace.h"

#include "trace_int.h"

/* ---- reader ---- */

static int64_t json_ns(const json_t *v)
{
	double d = json_number_value(v) * 1000.0;

	if (!json_is_number(v) || !isfinite(d) || d < 0 || d > 9.2e18)
		return -1;
	return (int64_t)llround(d);
}

static json_t *events_of(json_t *root)
{
	if (json_is_array(root))
		return root;
	return json_object_get(root, "traceEvents");
}

static json_t *load(const char *json, size_t len, char *err, size_t errlen)
{
	json_error_t je;
	json_t *root;

	root = json_loadb(json, len, 0, &je);
	if (!root)
		snprintf(err, errlen, "not valid JSON: line %d column %d: %s", je.line, je.column, je.text);
	return root;
}

/* An id written as a string of digits (gpubpf now) or as a JSON number (before). */
static uint64_t json_u64(const json_t *v)
{
	if (json_is_string(v))
		return strtoull(json_string_value(v), NULL, 10);
	return json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0;
}

int trace__read_file(const char *path, struct trace **out, char *err, size_t errlen)
{
	struct trace *t = NULL;
	json_t *root = NULL, *evs;
	size_t len, i;
	char *buf = NULL;
	json_t *e;
	int ret;

	*out = NULL;
	ret = pprof_read__slurp(path, TRACE_MAX_BYTES, &buf, &len);
	if (ret) {
		snprintf(err, errlen, "cannot read %s: %s", path, ret == -EFBIG ? "larger than 1 GiB" : strerror(-ret));
		return ret;
	}
	root = load(buf, len, err, errlen);
	free(buf);
	if (!root)
		return -EINVAL;
	evs = events_of(root);
	if (!json_is_array(evs)) {
		snprintf(err, errlen, "not a trace: no traceEvents array");
		ret = -EINVAL;
		goto out;
	}
	t = trace__new();
	if (!t) {
		ret = -ENOMEM;
		goto out;
	}
	json_array_foreach(evs, i, e)
	{
		const char *ph = json_string_value(json_object_get(e, "ph"));
		const char *cat = json_string_value(json_object_get(e, "cat"));
		json_t *args = json_object_get(e, "args");
		struct trace_event ev = {0};
		int64_t ts, dur;

		if (!ph || strcmp(ph, "X") || !cat)
			continue;
		if (!strcmp(cat, "cuda_api"))
			ev.kind = TRACE_API;
		else if (!strcmp(cat, "cuda_launch"))
			ev.kind = TRACE_LAUNCH;
		else if (!strcmp(cat, "kernel"))
			ev.kind = TRACE_KERNEL;
		else if (!strcmp(cat, "memcpy"))
			ev.kind = TRACE_MEMCPY;
		else
			continue;
		ev.name = json_string_value(json_object_get(e, "name"));
		ts = json_ns(json_object_get(e, "ts"));
		dur = json_ns(json_object_get(e, "dur"));
		if (!ev.name || ts < 0 || dur < 0) {
			snprintf(err, errlen, "event %zu: an X event needs a name, ts and dur", i);
			ret = -EINVAL;
			goto out;
		}
		ev.start_ns = (uint64_t)ts;
		ev.dur_ns = (uint64_t)dur;
		ev.pid = (int)json_integer_value(json_object_get(e, "pid"));
		ev.tid = (int)json_integer_value(json_object_get(e, "tid"));
		if (json_is_object(args)) {
			const char *s = json_string_value(json_object_get(args, "stream"));

			ev.device = (uint32_t)json_integer_value(json_object_get(args, "device"));
			ev.stream = s ? strtoull(s, NULL, 0) : 0;
			ev.bytes = (uint64_t)json_integer_value(json_object_get(args, "bytes"));
			ev.correlation = json_u64(json_object_get(args, "correlation"));
		}
		ret = trace__add(t, &ev);
		if (ret)
			goto out;
	}
	ret = 0;
	*out = t;
	t = NULL;
out:
	trace__free(t);
	json_decref(root);
	return ret;
}

/* ---- validator ---- */

struct vtrack {
	uint64_t last_ts;
	bool seen;
	int64_t *ends; /* X: end times of open slices; B: -1 marks a B slice */
	const char **names;
	size_t n, cap;
};

static uint64_t str_hash(const char *s)
{
	return htab__bytes(s, strlen(s));
}

static int vpush(struct vtrack *t, int64_t end, const char *name)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 8;
		int64_t *e = realloc(t->ends, cap * sizeof(*e));
		const char **n;

		if (!e)
			return -ENOMEM;
		t->ends = e;
		n = realloc(t->names, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		t->names = n;
		t->cap = cap;
	}
	t->ends[t->n] = end;
	t->names[t->n++] = name;
	return 0;
}

static void bad(char *err, size_t errlen, size_t i, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void bad(char *err, size_t errlen, size_t i, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(err, errlen, "event %zu: ", i);

	if (n < 0 || (size_t)n >= errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err + n, errlen - n, fmt, ap);
	va_end(ap);
}

int trace__validate(const char *json, size_t len, char *err, size_t errlen)
{
	struct hmap tracks = {0}, flows = {0};
	struct vtrack *tr = NULL;
	size_t ntr = 0, i;
	json_t *root, *evs, *e;
	int ret = 0;

	root = load(json, len, err, errlen);
	if (!root)
		return -EINVAL;
	evs = events_of(root);
	if (!json_is_array(evs)) {
		snprintf(err, errlen, "no traceEvents array");
		ret = -EINVAL;
		goto out;
	}
	if (json_is_object(root)) {
		const char *u = json_string_value(json_object_get(root, "displayTimeUnit"));

		if (json_object_get(root, "displayTimeUnit") && (!u || (strcmp(u, "ms") && strcmp(u, "ns")))) {
			snprintf(err, errlen, "displayTimeUnit must be \"ms\" or \"ns\"");
			ret = -EINVAL;
			goto out;
		}
	}
	json_array_foreach(evs, i, e)
	{
		const char *ph = json_string_value(json_object_get(e, "ph"));
		const char *name = json_string_value(json_object_get(e, "name"));
		json_t *jpid = json_object_get(e, "pid"), *jtid = json_object_get(e, "tid");
		int64_t ts = json_ns(json_object_get(e, "ts")), dur;
		struct vtrack *t;
		uint64_t v;

#define BAD(...)                                                                                                       \
	do {                                                                                                           \
		bad(err, errlen, i, __VA_ARGS__);                                                                      \
		ret = -EINVAL;                                                                                         \
		goto out;                                                                                              \
	} while (0)
		if (!json_is_object(e))
			BAD("not an object");
		if (!ph || strlen(ph) != 1 || !strchr("XBEiIMsftCbneNODPRc", ph[0]))
			BAD("unknown or missing phase \"ph\"");
		if (ph[0] == 'M') {
			json_t *args = json_object_get(e, "args");

			if (!name)
				BAD("metadata without a name");
			if ((!strcmp(name, "process_name") || !strcmp(name, "thread_name")) &&
			    !json_is_string(json_object_get(args, "name")))
				BAD("%s without args.name", name);
			continue;
		}
		if (ts < 0)
			BAD("missing or negative \"ts\"");
		if (ph[0] == 's' || ph[0] == 'f' || ph[0] == 't') {
			json_t *id = json_object_get(e, "id");
			uint64_t key = json_is_integer(id)  ? (uint64_t)json_integer_value(id)
				       : json_is_string(id) ? str_hash(json_string_value(id))
							    : 0;
			uint64_t bits = ph[0] == 's' ? 1 : ph[0] == 'f' ? 2 : 0;

			if (!json_is_integer(id) && !json_is_string(id))
				BAD("flow event without an id");
			if (!bits)
				continue;
			v = 0;
			hmap__get(&flows, key, 0, 0, &v);
			if (v & bits)
				BAD("flow id %" PRIu64 " has two '%c' events", key, ph[0]);
			ret = hmap__put(&flows, key, 0, 0, v | bits);
			if (ret)
				goto out;
			continue;
		}
		if (ph[0] != 'X' && ph[0] != 'B' && ph[0] != 'E')
			continue;
		if (!json_is_integer(jpid) || !json_is_integer(jtid))
			BAD("\"%s\" event without integer pid and tid", ph);
		if (ph[0] != 'E' && !name)
			BAD("\"%s\" event without a name", ph);
		if (!hmap__get(&tracks, (uint64_t)json_integer_value(jpid), (uint64_t)json_integer_value(jtid), 0,
			       &v)) {
			struct vtrack *n = realloc(tr, (ntr + 1) * sizeof(*n));

			if (!n) {
				ret = -ENOMEM;
				goto out;
			}
			tr = n;
			memset(&tr[ntr], 0, sizeof(tr[ntr]));
			v = ntr++;
			ret = hmap__put(&tracks, (uint64_t)json_integer_value(jpid), (uint64_t)json_integer_value(jtid),
					0, v);
			if (ret)
				goto out;
		}
		t = &tr[v];
		if (t->seen && (uint64_t)ts < t->last_ts)
			BAD("timestamp goes back on track pid %lld tid %lld", (long long)json_integer_value(jpid),
			    (long long)json_integer_value(jtid));
		t->seen = true;
		t->last_ts = (uint64_t)ts;
		/* complete slices that ended before this event are closed */
		while (t->n && t->ends[t->n - 1] >= 0 && t->ends[t->n - 1] <= ts)
			t->n--;
		if (ph[0] == 'X') {
			dur = json_ns(json_object_get(e, "dur"));
			if (dur < 0)
				BAD("X event without a non-negative \"dur\"");
			if (t->n && t->ends[t->n - 1] >= 0 && ts + dur > t->ends[t->n - 1])
				BAD("\"%s\" overlaps the slice enclosing it without nesting", name);
			ret = vpush(t, ts + dur, name);
			if (ret)
				goto out;
		} else if (ph[0] == 'B') {
			ret = vpush(t, -1, name);
			if (ret)
				goto out;
		} else {
			if (!t->n || t->ends[t->n - 1] >= 0)
				BAD("E event without a matching B");
			if (name && strcmp(name, t->names[t->n - 1]))
				BAD("E \"%s\" closes B \"%s\"", name, t->names[t->n - 1]);
			t->n--;
		}
#undef BAD
	}
	for (size_t k = 0; k < ntr; k++)
		for (size_t j = 0; j < tr[k].n; j++)
			if (tr[k].ends[j] < 0) {
				snprintf(err, errlen, "B \"%s\" never ends", tr[k].names[j]);
				ret = -EINVAL;
				goto out;
			}
	hmap_for_each(&flows, f)
	{
		if (f->val != 3) {
			snprintf(err, errlen, "flow id %" PRIu64 " has a%s but no %s", f->k[0],
				 f->val == 1 ? " start" : " finish", f->val == 1 ? "finish" : "start");
			ret = -EINVAL;
			goto out;
		}
	}
out:
	for (size_t k = 0; k < ntr; k++) {
		free(tr[k].ends);
		free(tr[k].names);
	}
	free(tr);
	hmap__clear(&tracks);
	hmap__clear(&flows);
	json_decref(root);
	return ret;
}
