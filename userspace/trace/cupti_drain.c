// SPDX-License-Identifier: MIT
/* Device time: draining the device-side samples into the model under the stacks that
 * launched them, the --trace device tracks, and what a recording says about device
 * time (counts, why it is unavailable, comments, the summary). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "../../bpf/cupti.h"
#include "cupti.h"
#include "cupti.skel.h"
#include "demangle.h"
#include "devtrace.h"
#include "hmap.h"
#include "links.h"
#include "log.h"
#include "numfmt.h"
#include "objscan.h"
#include "procmaps.h"
#include "procs.h"
#include "stacks.h"

#include "cupti_int.h"

/* ---- draining -------------------------------------------------------------------------- */

/* The executable mappings of the objects between the user's call and the probe, read
 * now: NULL where the process is gone. */
static struct ranges *read_ranges(uint32_t tgid)
{
	struct ranges *rg;
	char path[64], line[4096];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/maps", tgid);
	f = fopen(path, "re");
	if (!f)
		return NULL;
	rg = calloc(1, sizeof(*rg));
	if (!rg) {
		fclose(f);
		return NULL;
	}
	while (fgets(line, sizeof(line), f) && rg->n < MAX_RANGES) {
		struct procmaps_entry e;
		char name[256];
		const char *b;
		size_t len;

		if (procmaps__parse_line(line, strlen(line), &e) || !e.exec || !e.path)
			continue;
		len = e.path_len < sizeof(name) - 1 ? e.path_len : sizeof(name) - 1;
		memcpy(name, e.path, len);
		name[len] = '\0';
		b = strrchr(name, '/');
		b = b ? b + 1 : name;
		if (cupti__internal_object(b))
			rg->r[rg->n++] = (struct cupti_range){e.start, e.end};
	}
	fclose(f);
	/* a process on its way out has no mappings left: none of them is an answer */
	if (!rg->n) {
		free(rg);
		return NULL;
	}
	return rg;
}

/* Kept in the table (the old ones freed); false, and RG freed, where it cannot be. */
static bool keep_ranges(struct cupti_tracer *c, uint32_t tgid, struct ranges *rg)
{
	uint64_t old = 0;

	hmap__get(&c->tab, tgid, 0, HK_RANGES, &old);
	if (hmap__put(&c->tab, tgid, 0, HK_RANGES, (uint64_t)(uintptr_t)rg)) {
		free(rg);
		return false;
	}
	free((void *)(uintptr_t)old);
	return true;
}

static const struct ranges *ranges_of(struct cupti_tracer *c, uint32_t tgid)
{
	struct ranges *rg;
	uint64_t v;

	if (hmap__get(&c->tab, tgid, 0, HK_RANGES, &v) && v)
		return (const struct ranges *)(uintptr_t)v;
	rg = read_ranges(tgid);
	return rg && keep_ranges(c, tgid, rg) ? rg : NULL;
}

void cpt_ranges_refresh(struct cupti_tracer *c, uint32_t tgid)
{
	struct ranges *rg = read_ranges(tgid);

	if (rg)
		keep_ranges(c, tgid, rg);
}

static int add_dev_sample(struct cupti_tracer *c, const struct dev_key *k, const struct dev_val *v,
			  const struct dev_proc *p)
{
	struct session *s = c->s;
	struct prof_frame leaf[2];
	struct prof_label extra[3];
	uint64_t ips[STACKS_MAX_DEPTH];
	char kbuf[48], dbuf[16], sbuf[16], gbuf[16], *owned = NULL;
	const char *name, *api;
	int nleaf = 0, nextra = 0, n, trunc = 0, skip = 0, err;
	double scale, w = 0;
	uint64_t period = 0;

	SESSION_VALUES(values);
	/* In windows: each record counts 1/p of its window (cupti_win.c). Otherwise the
	 * followed share of a process's calls scales it (1 when every call is followed). */
	/* The cost measurement's launches: every one in its "on" phase was followed, at the
	 * start of the job's launches, where a short job's are; counted once, as what they
	 * are (the windows' periods come after it), not in the windows' books. */
	/* Measured again mid-run: the windows' periods (one standing in for those it took)
	 * estimate that time already; counted again, its launches would be twice in it. */
	if (k->window == DEV_WIN_REMEASURE) {
		c->remeasured_recs += v->count;
		return 0;
	}
	if (k->window == DEV_WIN_MEASURE) {
		c->measured_recs += v->count;
		if (k->kind == DEV_KERNEL) {
			c->measured_kernels += v->count;
			c->measured_kernel_ns += v->ns;
		}
		w = 1;
	} else if (c->win && k->window) {
		struct est_delay d;

		w = cpt_win_weight(c, k->tgid, k->tid, k->window, &period, &d);
		if (w > 0) {
			double est[3] = {k->kind == DEV_KERNEL ? (double)v->count : 0,
					 k->kind == DEV_KERNEL ? (double)v->ns : 0,
					 k->kind == DEV_KERNEL ? 0 : (double)v->ns};

			cpt_win_add(c, period, w, &d, (double)v->count, est);
			w = est_weight(w, d.mid);
		} else {
			c->unweighted += v->count;
		}
	}
	if (k->kind == DEV_KERNEL) {
		scale = w > 0 ? w : c->win ? 1 : p ? cupti__scale(p->ctr.launches_seen, p->ctr.launches_sampled) : 1;
		values[s->t_gpu_kernel_ns] = llround((double)v->ns * scale);
		name = k->name_id ? cpt_get_str(&c->tab, k->tgid, k->name_id, HK_NAME) : NULL;
		leaf[nleaf] = (struct prof_frame){.kind = PROF_FRAME_SYNTH, .addr = k->name_id};
		if (name) {
			owned = demangle(name);
			leaf[nleaf].name = owned ? owned : name;
			leaf[nleaf].sys_name = name;
		} else {
			snprintf(kbuf, sizeof(kbuf), "[cuda kernel #%u]", k->name_id);
			leaf[nleaf].name = kbuf;
		}
		nleaf++;
		if (k->window != DEV_WIN_MEASURE) {
			c->kernels += v->count;
			c->kernel_ns += v->ns;
		}
	} else {
		scale = w > 0 ? w : c->win ? 1 : p ? cupti__scale(p->ctr.copies_seen, p->ctr.copies_sampled) : 1;
		values[s->t_gpu_memcpy_ns] = llround((double)v->ns * scale);
		leaf[nleaf++] = (struct prof_frame){
		    .kind = PROF_FRAME_SYNTH, .name = cpt_dir_frame(k->kind == DEV_MEMSET ? DEV_DIR_MEMSET : k->dir)};
		if (k->window != DEV_WIN_MEASURE) {
			c->copies += v->count;
			c->copy_ns += v->ns;
		}
	}
	api = k->cbinfo ? cpt_get_str(&c->tab, k->tgid, DEV_NAME_API | k->cbinfo, HK_NAME) : NULL;
	if (api)
		leaf[nleaf++] = (struct prof_frame){.kind = PROF_FRAME_SYNTH, .name = api};
	snprintf(dbuf, sizeof(dbuf), "%u", k->device);
	extra[nextra++] = (struct prof_label){.key = "cuda_device", .str = dbuf};
	snprintf(sbuf, sizeof(sbuf), "%u", k->stream);
	extra[nextra++] = (struct prof_label){.key = "cuda_stream", .str = sbuf};
	if (k->graph_id) {
		snprintf(gbuf, sizeof(gbuf), "%u", k->graph_id);
		extra[nextra++] = (struct prof_label){.key = "cuda_graph", .str = gbuf};
	}

	n = stacks__read(&(struct stack_maps){bpf_map__fd(c->skel->maps.launch_stacks),
					      bpf_map__fd(c->skel->maps.launch_stacks_ovf),
					      bpf_map__fd(c->skel->maps.launch_own)},
			 k->ustack, ips, &trunc);
	s->truncated_stacks += (uint64_t)trunc;
	if (n > 0) {
		const struct ranges *rg = ranges_of(c, k->tgid);

		skip = rg ? cupti__internal_frames(ips, n, rg->r, rg->n) : 0;
		if (skip >= n)
			skip = 0; /* nothing of the user's: keep what there is */
		n -= skip;
		/* ips[skip] is a return address into the user's call: back into the call. */
		if (skip)
			ips[skip] -= 1;
	}
	/* The launch's own stack: its Python frames merged as in the launch's samples, and
	 * the names the thread had when it launched. */
	err = session__add_stack_sample_py(s, k->tgid, k->tid, k->names, NULL, 0, ips + skip, n, k->pystack, leaf,
					   nleaf, extra, nextra, values);
	free(owned);
	return err;
}

static int drain_buffer(struct cupti_tracer *c, unsigned buf)
{
	int counts_fd = bpf_map__fd(buf ? c->skel->maps.dcounts1 : c->skel->maps.dcounts0);
	int procs_fd = bpf_map__fd(c->skel->maps.dev_procs);
	struct dev_key key, next, *prev = NULL;
	struct dev_val val;
	int err = 0;

	while (bpf_map_get_next_key(counts_fd, prev, &next) == 0) {
		struct dev_proc p;
		bool have_p;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(counts_fd, &key, &val) || !val.count)
			continue;
		if (c->s->opts->all)
			procs__note_pid(c->s->procs, (int)key.tgid);
		have_p = bpf_map_lookup_elem(procs_fd, &key.tgid, &p) == 0;
		err = add_dev_sample(c, &key, &val, have_p ? &p : NULL);
		if (err)
			break;
	}
	stacks__clear(counts_fd, sizeof(struct dev_key));
	return err;
}

int cupti__drain(struct cupti_tracer *c, bool final)
{
	int err;

	if (!c->skel)
		return 0;
	/* Names first: the records about to be drained may use them; and the windows they
	 * were seen in, with their weights. */
	ring_buffer__consume(c->rb);
	cpt_win_tick(c);
	err = drain_buffer(c, stacks__flip(&c->skel->bss->buf_active));
	if (!err && final) {
		ring_buffer__consume(c->rb);
		err = drain_buffer(c, stacks__flip(&c->skel->bss->buf_active));
	}
	return err;
}

/* ---- --trace ---------------------------------------------------------------------------- */

int cupti__set_timeline(struct cupti_tracer *c, struct trace *t, size_t max_events)
{
	if (c->skel) /* the trace settings go in before the BPF object loads */
		return -EBUSY;
	devtrace__free(c->dt);
	c->dt = devtrace__new(t, max_events);
	return c->dt ? 0 : -ENOMEM;
}

int cupti__finish_timeline(struct cupti_tracer *c)
{
	if (!c->dt)
		return 0;
	if (c->rb)
		ring_buffer__consume(c->rb);
	return devtrace__link(c->dt);
}

void cupti__timeline_stats(struct cupti_tracer *c, uint64_t *events, uint64_t *dropped)
{
	struct devtrace_stats st = {0};

	if (c->dt)
		devtrace__stats(c->dt, &st);
	*events = st.records;
	*dropped = st.dropped + (c->skel ? c->skel->bss->lost_trace : 0);
}

/* ---- reporting ------------------------------------------------------------------------- */

void cupti__stats(struct cupti_tracer *c, struct cupti_stats *out)
{
	__u32 k, nk, *prev = NULL;
	struct dev_proc p;
	int procs_fd, fd;

	memset(out, 0, sizeof(*out));
	out->max_rate = c->max_rate;
	if (!c->skel)
		return;
	procs_fd = bpf_map__fd(c->skel->maps.dev_procs);
	fd = bpf_map__fd(c->skel->maps.stats);
	while (bpf_map_get_next_key(procs_fd, prev, &nk) == 0) {
		k = nk;
		prev = &k;
		if (bpf_map_lookup_elem(procs_fd, &k, &p))
			continue;
		out->launches_seen += p.ctr.launches_seen;
		out->launches_sampled += p.ctr.launches_sampled;
		out->copies_seen += p.ctr.copies_seen;
		out->copies_sampled += p.ctr.copies_sampled;
		out->dropped_unsampled += p.ctr.dropped_unsampled;
		out->lost += p.ctr.lost;
		out->unjoined += p.unjoined;
		out->invalid += p.invalid;
	}
	hmap_for_each(&c->tab, e)
	{
		if (e->k[2] == HK_WAS_ON)
			out->attached++;
	}
	out->kernels = c->kernels;
	out->copies = c->copies;
	out->kernel_ns = c->kernel_ns;
	out->copy_ns = c->copy_ns;
	out->lost_stacks = stacks__stat(fd, STAT_USTACK_LOST) + stacks__stat(fd, STAT_STACK_FULL);
	out->map_full = stacks__stat(fd, STAT_MAP_FULL);
	out->lost_events = c->skel->bss->lost_events;
	out->objects = c->objects;
	out->max_rate = c->max_rate;
}

const char *cupti__unavailable_reason(struct cupti_tracer *c)
{
	const char *lib = cupti__library_path();
	const char *why = NULL;

	if (c->rb)
		ring_buffer__consume(c->rb);
	if (c->kernels || c->copies)
		return NULL;
	if (c->load_failed) {
		snprintf(c->reason, sizeof(c->reason),
			 "a target has the injection library, but the device time BPF programs could not be loaded");
		return c->reason;
	}
	if (!c->objects) {
		const char *env = getenv("CUDA_INJECTION64_PATH");

		/* asked for: the summary of an estimate run on the H100 told its user to start the
		 * job with the library it had itself been told to leave out */
		if (c->left_idle)
			snprintf(c->reason, sizeof(c->reason),
				 "left out, as --no-device-time asks: the injection library in %d target object%s "
				 "stayed idle",
				 c->left_idle, c->left_idle == 1 ? "" : "s");
		else if (c->s->opts->command && c->s->opts->no_device_time)
			snprintf(c->reason, sizeof(c->reason),
				 "the command was started without the injection library, as --no-device-time asks");
		/* record -- set it for the command: the CUDA driver did not load it */
		else if (c->s->opts->command && env && lib && strcmp(env, lib) == 0)
			snprintf(c->reason, sizeof(c->reason),
				 "no target had the injection library loaded: the command ran with "
				 "CUDA_INJECTION64_PATH=%s, which a CUDA driver loads at the first CUDA call; none "
				 "reached one (no GPU driver here?)",
				 lib);
		else
			snprintf(c->reason, sizeof(c->reason),
				 "no target had the injection library loaded (start the job with "
				 "CUDA_INJECTION64_PATH=%s)",
				 lib ? lib : "/path/to/libgpubpf_inject.so");
		return c->reason;
	}
	hmap_for_each(&c->tab, e)
	{
		if (e->k[2] == HK_WAS_ON)
			return NULL; /* attached: no device work ran, which the counts say */
	}
	hmap_for_each(&c->tab, e)
	{
		if (e->k[2] == HK_STATUS)
			why = cpt_get_str(&c->tab, e->k[0], 0, HK_TEXT);
	}
	if (why)
		snprintf(c->reason, sizeof(c->reason), "the injection library stayed idle: %s", why);
	else
		snprintf(c->reason, sizeof(c->reason),
			 "the injection library is loaded but never attached (the target did not initialize CUDA "
			 "during the recording)");
	return c->reason;
}

/* Without windows (--exact, --trace, a kernel without uprobe_multi links) CUPTI is on all
 * the time: nothing is off to measure its cost per launch against, so the estimated
 * overhead does not hold it, and says so where the library followed anything (a timeline
 * states no overhead). */
#define NOT_MEASURED_SUMMARY                                                                                           \
	"; not in the overhead: CUPTI's cost to each launch it followed, which only windows measure "                  \
	"(1.2-1.5 us a launch on an H100)"
#define NOT_MEASURED_COMMENT                                                                                           \
	"cost: device time: not in the estimated overhead: what CUPTI's activity and callbacks added to each of "      \
	"the %" PRIu64 " launches and copies it was on for, which only windows measure (default mode measures it "     \
	"in the job and keeps it in the budget); on an H100 activity added 1.2-1.5 us and the subscription and "       \
	"callbacks 0.55-1.7 us to a launch of 4.0-4.8 us"

/* The library followed launches or copies with CUPTI on all the time (no windows). */
static bool followed_unmeasured(const struct cupti_stats *st)
{
	return st->launches_sampled || st->copies_sampled;
}

int cupti__add_comments(struct cupti_tracer *c, double elapsed)
{
	const char *why = cupti__unavailable_reason(c);
	struct cupti_stats st;
	char rate[32];
	int err;

	if (why)
		return profile__add_comment(c->s->prof, "gpu: device time unavailable: %s", why);
	cupti__stats(c, &st);
	if (c->win) {
		cpt_win_comments(c, elapsed);
		return profile__add_comment(
		    c->s->prof,
		    "gpu: device time from CUPTI (libgpubpf_inject.so) in %d of %d targets, in windows: %" PRIu64
		    " kernels (%.3f ms), %" PRIu64 " copies/memsets (%.3f ms) measured, of %" PRIu64
		    " launches and copies followed in %" PRIu64 " windows; each record counts 1/p of its window in "
		    "gpu_kernel_time and gpu_memcpy_time (estimates of the whole recording); %" PRIu64
		    " records of a window whose books were gone counted once, %" PRIu64
		    " of the cost measurement's launches counted once (%.3f ms), %" PRIu64
		    " of its measurements again not counted (the windows' periods cover them), %" PRIu64
		    " lost, %" PRIu64 " without a launch stack, %" PRIu64 " invalid",
		    st.attached, st.objects, st.kernels, (double)st.kernel_ns / 1e6, st.copies,
		    (double)st.copy_ns / 1e6, c->followed, c->windows, c->unweighted, c->measured_recs,
		    (double)c->measured_kernel_ns / 1e6, c->remeasured_recs, st.lost, st.unjoined, st.invalid);
	}
	if (st.max_rate)
		snprintf(rate, sizeof(rate), "at most %u/s", st.max_rate);
	else
		snprintf(rate, sizeof(rate), "every call");
	err = profile__add_comment(
	    c->s->prof,
	    "gpu: device time from CUPTI (libgpubpf_inject.so) in %d of %d targets: %" PRIu64
	    " kernels (%.3f ms), %" PRIu64 " copies/memsets (%.3f ms) measured; sampled (%s) %" PRIu64 " of %" PRIu64
	    " launches and %" PRIu64 " of %" PRIu64
	    " copies; gpu_kernel_time and gpu_memcpy_time are scaled by seen/sampled per process "
	    "to estimate the whole recording; %" PRIu64 " records of unsampled launches dropped, %" PRIu64
	    " lost, %" PRIu64 " without a launch stack, %" PRIu64 " invalid",
	    st.attached, st.objects, st.kernels, (double)st.kernel_ns / 1e6, st.copies, (double)st.copy_ns / 1e6, rate,
	    st.launches_sampled, st.launches_seen, st.copies_sampled, st.copies_seen, st.dropped_unsampled, st.lost,
	    st.unjoined, st.invalid);
	if (err == 0 && followed_unmeasured(&st))
		err = profile__add_comment(c->s->prof, NOT_MEASURED_COMMENT, st.launches_seen + st.copies_seen);
	return err;
}

static void total_plus(struct est_total *t, double x)
{
	t->est += x;
	t->lo += x;
	t->hi += x;
	t->sys_lo += x;
	t->sys_hi += x;
}

void cpt_win_totals(struct cupti_tracer *c, struct est_total *k, struct est_total *t)
{
	est_group_total(&c->est, 0, k);
	est_group_total(&c->est, 1, t);
	/* the cost measurement's kernels, counted once: what they were, with no error, at
	 * either end of CUPTI's cost's range too (the comment's two parts of the interval) */
	total_plus(k, (double)c->measured_kernels);
	total_plus(t, (double)c->measured_kernel_ns);
}

/* Device time in windows: the estimates of the whole recording, from how much was seen;
 * where the windows were too few for an interval (CUPTI's set-up and teardown, 10-20 ms a
 * window, let a 1% budget open one every 8-16 s), what to do about it. */
static void win_summary(struct cupti_tracer *c, const struct cupti_stats *st, char *buf, size_t len)
{
	struct est_total k, t;
	char n[32], seen[64];

	cpt_win_totals(c, &k, &t);
	numfmt__grouped(n, sizeof(n), k.est);
	snprintf(seen, sizeof(seen), "%" PRIu64 " kernels seen in %" PRIu64 " window%s", st->kernels, c->windows,
		 c->windows == 1 ? "" : "s");
	if (k.sampled >= 2 && isinf(k.hi))
		snprintf(buf, len,
			 ", device time: ~%s kernels %.4g ms (estimates, 95%% CI unbounded: see the profile's gpu "
			 "estimate; from %s)",
			 n, t.est / 1e6, seen);
	else if (k.sampled >= 2)
		snprintf(buf, len, ", device time: ~%s kernels %.4g ms (estimates, 95%% CI +-%.2g%%, from %s)", n,
			 t.est / 1e6, k.est > 0 ? 50 * (k.hi - k.lo) / k.est : 0, seen);
	else
		/* c->every is the windows' period in gpubpf's periods, 1 at least */
		snprintf(buf, len,
			 ", device time: ~%s kernels %.4g ms (from %s: too few for an estimate to trust; this budget "
			 "opens one every %.3g s, as CUPTI's set-up costs that much: record longer, or raise "
			 "--overhead-budget)",
			 n, t.est / 1e6, seen, c->period * c->every);
}

void cupti__summary(struct cupti_tracer *c, char *buf, size_t len)
{
	const char *why = cupti__unavailable_reason(c);
	struct cupti_stats st;

	if (why) {
		snprintf(buf, len, ", device time unavailable (%s)", why);
		return;
	}
	cupti__stats(c, &st);
	if (c->win) {
		win_summary(c, &st, buf, len);
		return;
	}
	snprintf(buf, len, ", device time: %" PRIu64 " kernels %.3g ms, %" PRIu64 " copies %.3g ms%s%s", st.kernels,
		 (double)st.kernel_ns / 1e6, st.copies, (double)st.copy_ns / 1e6,
		 st.launches_sampled < st.launches_seen || st.copies_sampled < st.copies_seen ? " (sampled; scaled)"
											      : "",
		 followed_unmeasured(&st) && !c->s->opts->trace ? NOT_MEASURED_SUMMARY : "");
}
