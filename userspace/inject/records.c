// SPDX-License-Identifier: MIT
/* The CUPTI-free core of the injection library: which calls are followed, which activity
 * records are kept, and how they are batched for the records() probe. No CUPTI types
 * here, so tests/unit/test_cupti.c exercises exactly this code. */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "inject.h"

int inj_debug;

void inj_trace(const char *fmt, ...)
{
	char buf[320];
	struct timespec ts;
	va_list ap;
	int n, m;

	if (inj_debug < 2)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	n = snprintf(buf, sizeof(buf), "gpubpf-inject: %ld.%06ld tid %ld: ", (long)ts.tv_sec, ts.tv_nsec / 1000,
		     (long)syscall(SYS_gettid));
	va_start(ap, fmt);
	m = vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	n += m < 0 ? 0 : m < (int)(sizeof(buf) - (size_t)n - 1) ? m : (int)(sizeof(buf) - (size_t)n - 2);
	buf[n++] = '\n';
	/* one write a line: lines of threads do not mix */
	if (write(STDERR_FILENO, buf, (size_t)n) < 0)
		return;
}

/* The launching thread's position in nested API calls: the runtime's cudaLaunchKernel
 * calls cuLaunchKernel, and both get callbacks (with different correlation ids). */
static __thread uint32_t tls_depth;
static __thread bool tls_sampled;
static __thread bool tls_counted; /* counted in in_followed (windows only) */
static __thread uint32_t tls_corr;
static __thread uint32_t tls_win;
static __thread uint32_t tls_cb_gen; /* inj_state.cb_gen at the outermost call's enter */
static __thread uint64_t tls_rng;
/* The cost measurement (devwin.c): the outermost launch call's start, and the half it
 * started in (activity off or on) and that half's generation. */
static __thread uint64_t tls_t0;
static __thread uint32_t tls_gen;
static __thread uint32_t tls_probes; /* dev_config.probe_gen at its start */
static __thread bool tls_act;
static __thread uint64_t tls_exit; /* when its last followed call returned (inj_ops.launch) */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

enum inj_api_class inj_classify(const char *name)
{
	static const struct {
		const char *prefix;
		enum inj_api_class cls;
	} table[] = {
	    {"cudaGraphLaunch", INJ_API_GRAPH}, {"cuGraphLaunch", INJ_API_GRAPH}, {"cudaLaunch", INJ_API_LAUNCH},
	    {"cuLaunch", INJ_API_LAUNCH},	{"cudaMemcpy", INJ_API_COPY},	  {"cudaMemset", INJ_API_COPY},
	    {"cuMemcpy", INJ_API_COPY},		{"cuMemset", INJ_API_COPY},
	};

	if (!name)
		return INJ_API_NONE;
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		size_t n = strlen(table[i].prefix);

		if (strncmp(name, table[i].prefix, n) == 0) {
			/* cudaLaunchHostFunc runs on the CPU: nothing to time on the device. */
			if (strstr(name, "HostFunc"))
				return INJ_API_NONE;
			return table[i].cls;
		}
	}
	return INJ_API_NONE;
}

uint32_t inj_copy_dir(uint32_t k)
{
	/* CUpti_ActivityMemcpyKind: 1 HtoD, 2 DtoH, 3 HtoA, 4 AtoH, 5 AtoA, 6 AtoD, 7 DtoA,
	 * 8 DtoD, 9 HtoH, 10 PtoP (peer: device to device). Arrays count as device memory. */
	switch (k) {
	case 1:
	case 3:
		return DEV_DIR_HTOD;
	case 2:
	case 4:
		return DEV_DIR_DTOH;
	case 5:
	case 6:
	case 7:
	case 8:
	case 10:
		return DEV_DIR_DTOD;
	case 9:
		return DEV_DIR_HTOH;
	}
	return DEV_DIR_OTHER;
}

int inj_state_init(struct inj_state *s, const struct inj_ops *ops)
{
	memset(s, 0, sizeof(*s));
	s->ops = *ops;
	s->every_n = 1;
	s->window_open = true;
	s->epoch = 1;
	s->next_name = 1;
	s->batch = calloc(1, sizeof(*s->batch) + DEV_BATCH_MAX * sizeof(struct dev_rec));
	if (!s->batch)
		return -ENOMEM;
	s->batch->magic = DEV_BATCH_MAGIC;
	s->batch->version = DEV_BATCH_VERSION;
	pthread_mutex_init(&s->lock, NULL);
	return 0;
}

void inj_state_fini(struct inj_state *s)
{
	if (!s->batch)
		return;
	free(s->batch);
	s->batch = NULL;
	for (size_t i = 0; i < INJ_NAMES_MAX; i++) {
		free(s->names[i].copy);
		s->names[i].copy = NULL;
	}
	pthread_mutex_destroy(&s->lock);
}

void inj_new_epoch(struct inj_state *s)
{
	/* Counters start again with each session: its seen/sampled ratio is its own. */
	__atomic_store_n(&s->ctr.launches_seen, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->ctr.launches_sampled, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->ctr.copies_seen, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->ctr.copies_sampled, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->ctr.dropped_unsampled, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->ctr.lost, 0, __ATOMIC_RELAXED);
	__atomic_add_fetch(&s->epoch, 1, __ATOMIC_RELEASE);
}

static uint32_t rng_next(void)
{
	/* xorshift64*, seeded per thread from its stack address: cheap, and independent
	 * of the launch sequence so periodic launch patterns do not alias with the rate. */
	uint64_t x = tls_rng;

	if (!x)
		x = (uint64_t)(uintptr_t)&x * 0x9e3779b97f4a7c15ull | 1;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	tls_rng = x;
	return (uint32_t)((x * 0x2545f4914f6cdd1dull) >> 32);
}

/* CORR followed; OUTER: the followed runtime call it is inside, or 0. */
static void mark_sampled(struct inj_state *s, uint32_t corr, uint32_t outer)
{
	__atomic_store_n(&s->outer[corr % INJ_SAMPLED_SLOTS], outer, __ATOMIC_RELAXED);
	__atomic_store_n(&s->sampled[corr % INJ_SAMPLED_SLOTS], corr, __ATOMIC_RELEASE);
}

/* The id a followed call's records are told under: the outer call's for a nested one. */
static uint32_t told_corr(const struct inj_state *s, uint32_t corr)
{
	uint32_t o = __atomic_load_n(&s->outer[corr % INJ_SAMPLED_SLOTS], __ATOMIC_RELAXED);

	return o ? o : corr;
}

bool inj_is_sampled(const struct inj_state *s, uint32_t corr)
{
	return corr && __atomic_load_n(&s->sampled[corr % INJ_SAMPLED_SLOTS], __ATOMIC_ACQUIRE) == corr;
}

static void announce_api(struct inj_state *s, uint32_t domain, uint32_t cbid, const char *func_name)
{
	uint32_t slot = ((domain & 1) << 10) | (cbid & 1023), epoch = __atomic_load_n(&s->epoch, __ATOMIC_ACQUIRE);

	if (!func_name || __atomic_load_n(&s->api_epoch[slot], __ATOMIC_RELAXED) == epoch)
		return;
	__atomic_store_n(&s->api_epoch[slot], epoch, __ATOMIC_RELAXED);
	s->ops.name(DEV_NAME_API | DEV_CBINFO(domain, cbid), func_name);
}

void inj_announce_handle(struct inj_state *s, uint64_t handle, const char *name)
{
	uint32_t epoch = __atomic_load_n(&s->epoch, __ATOMIC_ACQUIRE), i;
	uint64_t h = handle * 0x9e3779b97f4a7c15ull;

	if (!handle || !name || !*name || !s->ops.kname)
		return;
	/* Without the lock first: nearly every launch is of a handle announced already. */
	for (uint32_t k = 0; k < 8; k++) {
		i = (uint32_t)((h >> 40) + k) % INJ_HANDLE_SLOTS;
		if (__atomic_load_n(&s->handle_key[i], __ATOMIC_ACQUIRE) == handle &&
		    __atomic_load_n(&s->handle_epoch[i], __ATOMIC_ACQUIRE) == epoch)
			return;
	}
	pthread_mutex_lock(&s->lock);
	for (uint32_t k = 0; k < 8; k++) {
		uint64_t key;

		i = (uint32_t)((h >> 40) + k) % INJ_HANDLE_SLOTS;
		key = s->handle_key[i];
		if (key == handle && s->handle_epoch[i] == epoch)
			goto out; /* another thread announced it meanwhile */
		if (key && key != handle && s->handle_epoch[i] == epoch)
			continue;
		/* free, stale (an earlier attach) or ours from before: (re)claim it */
		__atomic_store_n(&s->handle_epoch[i], epoch, __ATOMIC_RELEASE);
		__atomic_store_n(&s->handle_key[i], handle, __ATOMIC_RELEASE);
		break;
	}
	/* Announced, also when the 8 slots of this attach were taken (then again at its next
	 * launch: rare with 8192 slots, and never a wrong name). */
	s->ops.kname(handle, name);
out:
	pthread_mutex_unlock(&s->lock);
}

static void follow(struct inj_state *s, uint32_t domain, uint32_t cbid, uint32_t corr, const char *func_name)
{
	mark_sampled(s, corr, 0);
	announce_api(s, domain, cbid, func_name);
	s->ops.launch(corr, DEV_CBINFO(domain, cbid), tls_win, tls_exit);
}

/* The library's own time in a callback of a launch call, from the callback's start T0,
 * while the cost is measured (in the "off" halves: an "on" half's include the launch
 * probe, which the calls' times have). Per launch call: all its callbacks, enter and exit,
 * the nested driver call's too (cb_calls counts the outermost enters, cb_n the callbacks). */
static void time_callback(struct inj_state *s, uint64_t t0)
{
	if (t0 && tls_t0 && !tls_act) {
		__atomic_add_fetch(&s->timing.cb_ns, now_ns() - t0, __ATOMIC_RELAXED);
		__atomic_add_fetch(&s->timing.cb_n, 1, __ATOMIC_RELAXED);
	}
}

static uint32_t probe_gen(const struct inj_state *s)
{
	return s->probe_gen ? __atomic_load_n(s->probe_gen, __ATOMIC_ACQUIRE) : 0;
}

uint64_t inj_callback_start(struct inj_state *s)
{
	return __atomic_load_n(&s->timing.on, __ATOMIC_ACQUIRE) ? now_ns() : 0;
}

void inj_api_enter(struct inj_state *s, uint64_t t_cb, enum inj_api_class cls, uint32_t domain, uint32_t cbid,
		   uint32_t corr, const char *func_name)
{
	bool timing = __atomic_load_n(&s->timing.on, __ATOMIC_ACQUIRE);
	uint64_t t0 = timing ? (t_cb ? t_cb : now_ns()) : 0;
	uint32_t n, gen = __atomic_load_n(&s->cb_gen, __ATOMIC_ACQUIRE);

	/* An enter after callbacks were switched off and on: the call this thread was in
	 * lost its exit callback, and this one is not inside it. */
	if (tls_depth > 0 && gen != tls_cb_gen) {
		if (tls_counted)
			__atomic_sub_fetch(&s->in_followed, 1, __ATOMIC_RELEASE);
		tls_counted = false;
		tls_depth = 0;
		tls_sampled = false;
		tls_t0 = 0;
	}
	if (tls_depth++ > 0) {
		/* The driver call inside a followed runtime call, where it has an id of its
		 * own: its records may carry it, and are told under the outer call's id (its
		 * stack, its API function). No second launch probe: on an H100 its trap cost
		 * a window's launch as much as CUPTI's activity did. */
		if (tls_sampled && corr && corr != tls_corr)
			mark_sampled(s, corr, tls_corr);
		time_callback(s, t0);
		return;
	}
	tls_cb_gen = gen;
	/* The outermost launch call, timed from here to its exit callback. */
	tls_t0 = timing && cls != INJ_API_COPY ? t0 : 0;
	if (tls_t0) {
		tls_gen = __atomic_load_n(&s->timing.gen, __ATOMIC_ACQUIRE);
		tls_probes = probe_gen(s);
		tls_act = __atomic_load_n(&s->timing.activity, __ATOMIC_ACQUIRE);
		if (!tls_act)
			__atomic_add_fetch(&s->timing.cb_calls, 1, __ATOMIC_RELAXED);
	}
	if (cls == INJ_API_COPY)
		__atomic_add_fetch(&s->ctr.copies_seen, 1, __ATOMIC_RELAXED);
	else
		__atomic_add_fetch(&s->ctr.launches_seen, 1, __ATOMIC_RELAXED);
	n = __atomic_load_n(&s->every_n, __ATOMIC_RELAXED);
	tls_corr = corr;
	/* Windows: every call in one is followed, under its id; none outside (nor while the
	 * cost is measured). Else 1 in every_n while the window is open. */
	tls_win = __atomic_load_n(&s->win_id, __ATOMIC_ACQUIRE);
	if (tls_t0 && tls_act)
		/* followed as in a window, so its cost is timed too */
		tls_win = __atomic_load_n(&s->timing.again, __ATOMIC_RELAXED) ? DEV_WIN_REMEASURE : DEV_WIN_MEASURE;
	if (s->windowed)
		tls_sampled = corr && tls_win;
	else
		tls_sampled =
		    corr && __atomic_load_n(&s->window_open, __ATOMIC_RELAXED) && (n <= 1 || rng_next() % n == 0);
	if (!tls_sampled) {
		time_callback(s, t0);
		return;
	}
	/* only a window's end waits for the calls in flight: no shared atomic otherwise */
	tls_counted = s->windowed;
	if (tls_counted)
		__atomic_add_fetch(&s->in_followed, 1, __ATOMIC_ACQ_REL);
	if (cls == INJ_API_COPY)
		__atomic_add_fetch(&s->ctr.copies_sampled, 1, __ATOMIC_RELAXED);
	else
		__atomic_add_fetch(&s->ctr.launches_sampled, 1, __ATOMIC_RELAXED);
	follow(s, domain, cbid, corr, func_name);
	time_callback(s, t0);
}

/* A timed launch call ended at T: kept in its half and under the state gpubpf's launch
 * probes were in, unless activity switched meanwhile, or the probes did (the call's time
 * would be neither state's) or were going in or out. */
static void timed_call(struct inj_state *s, uint64_t t)
{
	struct inj_timing *tm = &s->timing;
	uint32_t i, p = (tls_probes & 3) == DEV_PROBE_GEN_IN ? INJ_PROBES_IN : INJ_PROBES_OUT;

	if (!__atomic_load_n(&tm->on, __ATOMIC_ACQUIRE) || t <= tls_t0 || t - tls_t0 > UINT32_MAX)
		return;
	if (__atomic_load_n(&tm->gen, __ATOMIC_ACQUIRE) != tls_gen || probe_gen(s) != tls_probes ||
	    (tls_probes & 3) == DEV_PROBE_GEN_SWITCHING) {
		i = __atomic_load_n(&tm->gen, __ATOMIC_ACQUIRE) != tls_gen ? 0 : probe_gen(s) != tls_probes ? 1 : 2;
		__atomic_add_fetch(&tm->not_kept[i], 1, __ATOMIC_RELAXED);
		return;
	}
	i = __atomic_fetch_add(&tm->n[tls_act][p], 1, __ATOMIC_ACQ_REL);
	/* the first "off" phase keeps half of its slots for the last one (devwin.c) */
	if (i < (tls_act || __atomic_load_n(&tm->phase, __ATOMIC_ACQUIRE) ? INJ_TIMED_MAX : INJ_TIMED_MAX / 2))
		__atomic_store_n(&tm->ns[tls_act][p][i], (uint32_t)(t - tls_t0), __ATOMIC_RELEASE);
}

void inj_api_exit(struct inj_state *s)
{
	uint64_t t0 = __atomic_load_n(&s->timing.on, __ATOMIC_ACQUIRE) ? now_ns() : 0;

	if (tls_depth > 0)
		tls_depth--;
	if (tls_depth == 0) {
		if (tls_counted)
			__atomic_sub_fetch(&s->in_followed, 1, __ATOMIC_RELEASE);
		if (tls_sampled)
			tls_exit = t0 ? t0 : now_ns();
		tls_counted = false;
		tls_sampled = false;
		if (tls_t0 && t0)
			timed_call(s, t0);
		time_callback(s, t0);
		tls_t0 = 0;
		return;
	}
	time_callback(s, t0);
}

bool inj_wait_followed(struct inj_state *s, uint64_t max_ns)
{
	uint64_t t0 = now_ns();

	while (__atomic_load_n(&s->in_followed, __ATOMIC_ACQUIRE) > 0) {
		if (now_ns() - t0 >= max_ns)
			return false;
		sched_yield();
	}
	return true;
}

/* Under lock. A kernel name's id, announcing it once per attach generation. Keyed by its
 * text: CUPTI shares one string among every record of a kernel, but frees it when it is
 * finalized after a window (cupti_backend.c), and the next CUPTI's string for the same
 * kernel is another pointer (or a freed one is reused for another kernel). */
static uint64_t name_hash(const char *name, size_t *len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t n = 0;

	for (; name[n] && n < INJ_NAME_MAX; n++)
		h = (h ^ (uint8_t)name[n]) * 0x100000001b3ull;
	*len = n;
	return h;
}

static uint32_t name_id(struct inj_state *s, const char *name)
{
	uint32_t epoch = __atomic_load_n(&s->epoch, __ATOMIC_ACQUIRE),
		 gen = __atomic_load_n(&s->names_gen, __ATOMIC_ACQUIRE);
	struct inj_name_ref *c = &s->name_cache[((uintptr_t)name >> 4) % INJ_NAME_CACHE];
	struct inj_name *e;
	uint64_t h;
	size_t len;

	if (!name)
		return 0;
	if (c->ptr == name && c->gen == gen) {
		e = &s->names[c->slot];
		goto found;
	}
	h = name_hash(name, &len);
	for (uint32_t i = 0, slot = (uint32_t)(h >> 40) % INJ_NAMES_MAX; i < INJ_NAMES_MAX;
	     i++, slot = (slot + 1) % INJ_NAMES_MAX) {
		e = &s->names[slot];
		if (e->copy && e->hash == h && strncmp(e->copy, name, len) == 0 && !e->copy[len]) {
			c->ptr = name;
			c->gen = gen;
			c->slot = slot;
			goto found;
		}
		if (!e->copy) {
			/* Keep the last eighth free so lookups of absent names stay short. */
			if (s->next_name >= INJ_NAMES_MAX - INJ_NAMES_MAX / 8)
				return 0;
			e->copy = strndup(name, len);
			if (!e->copy)
				return 0;
			e->hash = h;
			e->id = s->next_name++;
			e->epoch = epoch;
			s->ops.name(e->id, e->copy);
			return e->id;
		}
	}
	return 0;
found:
	if (e->epoch != epoch) {
		e->epoch = epoch;
		s->ops.name(e->id, e->copy);
	}
	return e->id;
}

static void flush_locked(struct inj_state *s)
{
	struct dev_batch *b = s->batch;
	uint64_t lost = __atomic_load_n(&s->ctr.lost, __ATOMIC_RELAXED);

	/* a batch of no record still tells gpubpf of records lost (a window whose every
	 * kernel was still running when CUPTI was forced to hand its buffer back) */
	if (!b->count && lost == s->lost_told)
		return;
	s->lost_told = lost;
	b->epoch = __atomic_load_n(&s->epoch, __ATOMIC_RELAXED);
	b->ctr.launches_seen = __atomic_load_n(&s->ctr.launches_seen, __ATOMIC_RELAXED);
	b->ctr.launches_sampled = __atomic_load_n(&s->ctr.launches_sampled, __ATOMIC_RELAXED);
	b->ctr.copies_seen = __atomic_load_n(&s->ctr.copies_seen, __ATOMIC_RELAXED);
	b->ctr.copies_sampled = __atomic_load_n(&s->ctr.copies_sampled, __ATOMIC_RELAXED);
	b->ctr.dropped_unsampled = __atomic_load_n(&s->ctr.dropped_unsampled, __ATOMIC_RELAXED);
	b->ctr.lost = lost;
	s->ops.batch(b);
	b->count = 0;
}

/* Under lock: DEV_REC_* for timed record A, its stream's last record then A. Records of a
 * stream come in the order they ran (CUPTI's buffers are filled as they end), those of
 * calls not followed too (they ran before the next); a stream not seen yet, or one pushed
 * out of the table, had nothing queued as far as anyone can tell. */
static uint32_t pace_of(struct inj_state *s, const struct inj_activity *a)
{
	struct inj_stream *e = NULL, *oldest = &s->streams[0];
	uint32_t pace = DEV_REC_PACED;

	for (uint32_t i = 0; i < INJ_STREAMS && !e; i++) {
		struct inj_stream *x = &s->streams[i];

		if (x->end && x->device == a->device && x->stream == a->stream)
			e = x;
		else if (x->end < oldest->end)
			oldest = x;
	}
	if (!e) {
		e = oldest;
		e->device = a->device;
		e->stream = a->stream;
		e->end = 0;
	} else if (e->corr == a->corr) {
		pace = 0; /* not its launch's first */
	} else if (a->start <= e->end + DEV_QUEUED_GAP_NS) {
		pace |= DEV_REC_QUEUED;
	}
	e->corr = a->corr;
	if (a->end > e->end)
		e->end = a->end;
	return pace;
}

int inj_add_activity(struct inj_state *s, const struct inj_activity *a)
{
	struct dev_rec *r;
	uint32_t pace = 0;

	if (a->kind != DEV_KERNEL && a->kind != DEV_MEMCPY && a->kind != DEV_MEMSET)
		return -EINVAL;
	if (!a->untimed && a->end) {
		pthread_mutex_lock(&s->lock);
		pace = pace_of(s, a);
		pthread_mutex_unlock(&s->lock);
	}
	if (!inj_is_sampled(s, a->corr)) {
		__atomic_add_fetch(&s->ctr.dropped_unsampled, 1, __ATOMIC_RELAXED);
		return 0;
	}
	/* Only a followed call's record without times is a loss. The cost measurement's "on"
	 * half has activity on for every launch and follows the timed ones alone: a forced
	 * flush that handed back the others' kernels still queued had counted them lost
	 * (tests/e2e/82, device-bound, on a loaded machine). */
	if (a->untimed) {
		inj_count_lost(s, 1);
		return 0;
	}
	__atomic_add_fetch(&s->kept, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&s->lock);
	if (s->batch->count >= DEV_BATCH_MAX)
		flush_locked(s);
	r = &s->batch->recs[s->batch->count++];
	memset(r, 0, sizeof(*r));
	r->start = a->start;
	r->end = a->end >= a->start ? a->end : a->start;
	r->corr = told_corr(s, a->corr);
	r->kind = a->kind;
	r->device = a->device;
	r->stream = a->stream;
	r->graph_id = a->graph_id;
	r->pace = pace;
	switch (a->kind) {
	case DEV_KERNEL:
		r->name_id = name_id(s, a->name);
		break;
	case DEV_MEMCPY:
		r->bytes = a->bytes;
		r->dir = inj_copy_dir(a->cupti_copy_kind);
		break;
	case DEV_MEMSET:
		r->bytes = a->bytes;
		r->dir = DEV_DIR_MEMSET;
		break;
	}
	pthread_mutex_unlock(&s->lock);
	return 1;
}

void inj_flush(struct inj_state *s)
{
	pthread_mutex_lock(&s->lock);
	flush_locked(s);
	pthread_mutex_unlock(&s->lock);
}

void inj_count_lost(struct inj_state *s, uint64_t n)
{
	__atomic_add_fetch(&s->ctr.lost, n, __ATOMIC_RELAXED);
}
