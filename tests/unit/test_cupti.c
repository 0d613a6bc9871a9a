// SPDX-License-Identifier: MIT
/* Activity record handling of the injection library (userspace/inject/records.c, the
 * very code libgpubpf_inject.so runs) and gpubpf's side helpers (userspace/trace/cupti.c). */
#include "test.h"

#include "../../userspace/inject/records.c"
#include "cupti.h"

#define MAXB 8
static struct dev_rec got[4 * DEV_BATCH_MAX];
static int ngot, nbatches, nlaunch, nnames;
static uint32_t last_corr, last_cbinfo, last_name_id;
static char last_name[64];
static struct dev_counters last_ctr;

static void rec_launch(uint32_t corr, uint32_t cbinfo, uint32_t win, uint64_t prev_exit)
{
	(void)win;
	(void)prev_exit;
	nlaunch++;
	last_corr = corr;
	last_cbinfo = cbinfo;
}

static void rec_batch(const struct dev_batch *b)
{
	nbatches++;
	last_ctr = b->ctr;
	if (b->magic != DEV_BATCH_MAGIC || b->version != DEV_BATCH_VERSION || b->count > DEV_BATCH_MAX)
		return;
	for (uint32_t i = 0; i < b->count && ngot < (int)(sizeof(got) / sizeof(got[0])); i++)
		got[ngot++] = b->recs[i];
}

static void rec_name(uint32_t id, const char *name)
{
	nnames++;
	last_name_id = id;
	snprintf(last_name, sizeof(last_name), "%s", name);
}

static int nknames;
static uint64_t last_handle;

static void rec_kname(uint64_t handle, const char *name)
{
	nknames++;
	last_handle = handle;
	snprintf(last_name, sizeof(last_name), "%s", name);
}

static const struct inj_ops ops = {rec_launch, rec_batch, rec_name, rec_kname};
static struct inj_state st;

static void reset(void)
{
	inj_state_fini(&st);
	inj_state_init(&st, &ops);
	ngot = nbatches = nlaunch = nnames = nknames = 0;
}

static void launch(uint32_t corr, enum inj_api_class cls, uint32_t cbid, const char *fn)
{
	inj_api_enter(&st, 0, cls, 2, cbid, corr, fn);
	inj_api_exit(&st);
}

TEST(classify)
{
	CHECK_INT(inj_classify("cudaLaunchKernel_v7000"), INJ_API_LAUNCH);
	CHECK_INT(inj_classify("cuLaunchKernelEx_ptsz"), INJ_API_LAUNCH);
	CHECK_INT(inj_classify("cudaGraphLaunch_v10000"), INJ_API_GRAPH);
	CHECK_INT(inj_classify("cuGraphLaunch"), INJ_API_GRAPH);
	CHECK_INT(inj_classify("cudaMemcpyAsync_v3020"), INJ_API_COPY);
	CHECK_INT(inj_classify("cuMemsetD32Async"), INJ_API_COPY);
	CHECK_INT(inj_classify("cudaLaunchHostFunc"), INJ_API_NONE);
	CHECK_INT(inj_classify("cudaMalloc"), INJ_API_NONE);
	CHECK_INT(inj_classify(NULL), INJ_API_NONE);
}

/* Each launch's first record on its stream says who set its pace: the launch (its stream
 * idle before it: DEV_REC_PACED) or the device (it started as the one before it on the
 * stream ended, within DEV_QUEUED_GAP_NS: DEV_REC_QUEUED too); a launch's further records
 * (a graph's nodes) say nothing. Records of calls not followed keep their stream's books
 * (they ran before the next); untimed ones do not. */
TEST(records_tell_who_set_the_pace)
{
	struct inj_activity a = {.kind = DEV_KERNEL, .device = 0, .stream = 7, .name = "k"};
	static const struct {
		uint32_t corr, stream;
		uint64_t start, end;
		bool untimed;
	} rec[] = {
	    {10, 7, 1000, 2000, false},				/* the stream's first */
	    {11, 7, 2000, 3000, false},				/* as the last ended */
	    {11, 7, 3000, 3500, false},				/* the same launch's second kernel */
	    {12, 7, 3500 + DEV_QUEUED_GAP_NS, 6000, false},	/* within the gap */
	    {13, 7, 6000 + DEV_QUEUED_GAP_NS + 1, 8000, false}, /* after the stream idled */
	    {14, 8, 2500, 9000, false},				/* another stream's first, the device busy */
	    {99, 7, 8000, 9500, false},				/* a call not followed, on stream 7 */
	    {16, 7, 0, 0, true},				/* untimed */
	    {15, 7, 9600, 9900, false},				/* 0.1 us after 99 ended */
	};
	static const uint32_t want[] = {
	    DEV_REC_PACED, DEV_REC_PACED | DEV_REC_QUEUED, 0, DEV_REC_PACED | DEV_REC_QUEUED, DEV_REC_PACED,
	    DEV_REC_PACED, DEV_REC_PACED | DEV_REC_QUEUED};

	reset();
	for (uint32_t c = 10; c <= 16; c++)
		launch(c, INJ_API_LAUNCH, 211, "cudaLaunchKernel");
	for (size_t i = 0; i < sizeof(rec) / sizeof(rec[0]); i++) {
		a.corr = rec[i].corr;
		a.stream = rec[i].stream;
		a.start = rec[i].start;
		a.end = rec[i].end;
		a.untimed = rec[i].untimed;
		inj_add_activity(&st, &a);
	}
	inj_flush(&st);
	CHECK_INT(ngot, 7);
	for (int i = 0; i < ngot && i < 7; i++) {
		CHECK_INT(got[i].corr, i < 2 ? 10 + i : i < 6 ? 9 + i : 15);
		CHECK_INT(got[i].pace, want[i]);
	}
}

TEST(kernel_record_kept_with_name)
{
	static const char *name = "_Z8kernel_aPfi";
	struct inj_activity a = {
	    .kind = DEV_KERNEL, .corr = 77, .start = 100, .end = 1100, .device = 1, .stream = 9, .name = name};

	reset();
	launch(77, INJ_API_LAUNCH, 211, "cudaLaunchKernel");
	CHECK_INT(nlaunch, 1);
	CHECK_INT(last_corr, 77);
	CHECK_INT(last_cbinfo, DEV_CBINFO(2, 211));
	CHECK_INT(nnames, 1); /* the API function's name */
	CHECK_INT(last_name_id, DEV_NAME_API | DEV_CBINFO(2, 211));
	CHECK_INT(inj_add_activity(&st, &a), 1);
	CHECK_INT(inj_add_activity(&st, &a), 1);
	inj_flush(&st);
	CHECK_INT(nbatches, 1);
	CHECK_INT(ngot, 2);
	CHECK_INT(got[0].kind, DEV_KERNEL);
	CHECK_INT(got[0].end - got[0].start, 1000);
	CHECK_INT(got[0].device, 1);
	CHECK_INT(got[0].stream, 9);
	CHECK_INT(got[0].corr, 77);
	CHECK(got[0].name_id != 0);
	CHECK_INT(got[1].name_id, got[0].name_id);
	CHECK_INT(nnames, 2); /* the kernel's name, once */
	CHECK_STR(last_name, name);
	CHECK_INT(last_ctr.launches_seen, 1);
	CHECK_INT(last_ctr.launches_sampled, 1);
}

TEST(names_announced_again_each_attach)
{
	static const char *name = "k";
	struct inj_activity a = {.kind = DEV_KERNEL, .corr = 5, .start = 1, .end = 2, .name = name};

	reset();
	launch(5, INJ_API_LAUNCH, 211, "cudaLaunchKernel");
	inj_add_activity(&st, &a);
	CHECK_INT(nnames, 2);
	inj_new_epoch(&st);
	launch(5, INJ_API_LAUNCH, 211, "cudaLaunchKernel");
	inj_add_activity(&st, &a);
	CHECK_INT(nnames, 4);
	inj_flush(&st);
	CHECK_INT(got[0].name_id, got[1].name_id);
	CHECK_INT(last_ctr.launches_seen, 1); /* counters restart with the session */
}

/* CUPTI finalized after a window frees its name strings, and the next CUPTI may put
 * another kernel's name at the same address: a name is its text, never its pointer. */
TEST(name_at_a_reused_pointer_after_finalize)
{
	static char buf[32] = "kernel_a";
	struct inj_activity a = {.kind = DEV_KERNEL, .corr = 5, .start = 1, .end = 2, .name = buf};

	reset();
	launch(5, INJ_API_LAUNCH, 211, "cudaLaunchKernel");
	inj_add_activity(&st, &a);
	launch(6, INJ_API_LAUNCH, 211, "cudaLaunchKernel");
	a.corr = 6;
	inj_add_activity(&st, &a);
	__atomic_add_fetch(&st.names_gen, 1, __ATOMIC_RELEASE); /* cuptiFinalize */
	snprintf(buf, sizeof(buf), "kernel_b");
	launch(7, INJ_API_LAUNCH, 211, "cudaLaunchKernel");
	a.corr = 7;
	inj_add_activity(&st, &a);
	inj_flush(&st);
	CHECK_INT(ngot, 3);
	CHECK_INT(got[0].name_id, got[1].name_id);
	CHECK(got[2].name_id != got[0].name_id);
	CHECK_STR(last_name, "kernel_b");
}

/* Launch handles are named once per handle and attach, for every launch (followed or
 * not): 10,000 launches of 3 kernels cost 3 announcements; a new attach announces them
 * again; a full table degrades to announcing again, never to a wrong name. */
TEST(launch_handles_named_once_per_attach)
{
	reset();
	for (int i = 0; i < 10000; i++)
		inj_announce_handle(&st, 0x25448660 + (uint64_t)(i % 3) * 0x40, "_Z8kernel_aPfi");
	CHECK_INT(nknames, 3);
	CHECK_INT(last_handle, 0x25448660 + 2 * 0x40);
	CHECK_STR(last_name, "_Z8kernel_aPfi");
	inj_announce_handle(&st, 0, "x");	/* no handle */
	inj_announce_handle(&st, 0x1000, NULL); /* no name */
	inj_announce_handle(&st, 0x1000, "");
	CHECK_INT(nknames, 3);
	inj_new_epoch(&st);
	inj_announce_handle(&st, 0x25448660, "_Z8kernel_aPfi");
	inj_announce_handle(&st, 0x25448660, "_Z8kernel_aPfi");
	CHECK_INT(nknames, 4);
	/* many more handles than slots: each still announced at least once */
	reset();
	for (uint64_t h = 1; h <= 3 * INJ_HANDLE_SLOTS; h++)
		inj_announce_handle(&st, h * 4096, "k");
	CHECK(nknames >= 3 * INJ_HANDLE_SLOTS);
}

TEST(memcpy_and_memset)
{
	struct inj_activity c = {
	    .kind = DEV_MEMCPY, .corr = 10, .start = 5, .end = 705, .bytes = 4096, .cupti_copy_kind = 1};
	struct inj_activity m = {.kind = DEV_MEMSET, .corr = 11, .start = 1, .end = 129, .bytes = 128};

	reset();
	launch(10, INJ_API_COPY, 41, "cudaMemcpyAsync");
	launch(11, INJ_API_COPY, 51, "cudaMemsetAsync");
	CHECK_INT(inj_add_activity(&st, &c), 1);
	CHECK_INT(inj_add_activity(&st, &m), 1);
	inj_flush(&st);
	CHECK_INT(ngot, 2);
	CHECK_INT(got[0].kind, DEV_MEMCPY);
	CHECK_INT(got[0].dir, DEV_DIR_HTOD);
	CHECK_INT(got[0].bytes, 4096);
	CHECK_INT(got[0].end - got[0].start, 700);
	CHECK_INT(got[1].kind, DEV_MEMSET);
	CHECK_INT(got[1].dir, DEV_DIR_MEMSET);
	CHECK_INT(got[1].bytes, 128);
	CHECK_INT(last_ctr.copies_seen, 2);
	CHECK_INT(last_ctr.launches_seen, 0);
	CHECK_INT(inj_copy_dir(2), DEV_DIR_DTOH);
	CHECK_INT(inj_copy_dir(8), DEV_DIR_DTOD);
	CHECK_INT(inj_copy_dir(10), DEV_DIR_DTOD);
	CHECK_INT(inj_copy_dir(9), DEV_DIR_HTOH);
	CHECK_INT(inj_copy_dir(0), DEV_DIR_OTHER);
	CHECK_INT(inj_copy_dir(99), DEV_DIR_OTHER);
}

TEST(graph_kernels_share_the_launch)
{
	struct inj_activity a = {.kind = DEV_KERNEL, .corr = 300, .start = 0, .end = 300, .graph_id = 42, .name = "g"};

	reset();
	launch(300, INJ_API_GRAPH, 311, "cudaGraphLaunch");
	for (int i = 0; i < 3; i++)
		CHECK_INT(inj_add_activity(&st, &a), 1);
	inj_flush(&st);
	CHECK_INT(ngot, 3);
	for (int i = 0; i < 3; i++) {
		CHECK_INT(got[i].graph_id, 42);
		CHECK_INT(got[i].corr, 300);
	}
}

TEST(unsampled_and_invalid_dropped)
{
	struct inj_activity a = {.kind = DEV_KERNEL, .corr = 999, .start = 0, .end = 10, .name = "x"};
	struct inj_activity bad = {.kind = 17, .corr = 1};
	struct inj_activity zero = {.kind = DEV_KERNEL, .corr = 0};

	reset();
	CHECK_INT(inj_add_activity(&st, &a), 0);
	CHECK_INT(inj_add_activity(&st, &zero), 0);
	CHECK_INT(inj_add_activity(&st, &bad), -EINVAL);
	/* An id that shares the slot of a followed one is not followed. */
	launch(5, INJ_API_LAUNCH, 211, "cudaLaunchKernel");
	a.corr = 5 + INJ_SAMPLED_SLOTS;
	CHECK_INT(inj_add_activity(&st, &a), 0);
	inj_flush(&st);
	CHECK_INT(ngot, 0);
	CHECK_INT(nbatches, 0); /* nothing kept, nothing sent */
	CHECK_INT(__atomic_load_n(&st.ctr.dropped_unsampled, __ATOMIC_RELAXED), 3);
	/* end before start is clamped: no negative durations reach BPF */
	a.corr = 5;
	a.start = 100;
	a.end = 50;
	CHECK_INT(inj_add_activity(&st, &a), 1);
	inj_flush(&st);
	CHECK_INT(ngot, 1);
	CHECK_INT(got[0].end, got[0].start);
}

/* A window whose every kernel was still running when CUPTI was forced to hand its buffer
 * back: no record is kept, and gpubpf still hears of the losses (once). */
TEST(losses_told_without_a_record)
{
	reset();
	inj_count_lost(&st, 7);
	inj_flush(&st);
	CHECK_INT(nbatches, 1);
	CHECK_INT(ngot, 0);
	CHECK_INT(last_ctr.lost, 7);
	inj_flush(&st);
	CHECK_INT(nbatches, 1); /* nothing new: nothing sent */
}

/* A record CUPTI could not time (a forced flush's kernel still queued) is a loss only
 * where its call was followed: the cost measurement has activity on for launches it does
 * not follow, whose kernels a device-bound job still has queued at its end. */
TEST(untimed_record_lost_only_if_followed)
{
	struct inj_activity a = {.kind = DEV_KERNEL, .corr = 40, .untimed = true, .name = "k"};

	reset();
	CHECK_INT(inj_add_activity(&st, &a), 0); /* no call followed under 40 */
	CHECK_INT(__atomic_load_n(&st.ctr.dropped_unsampled, __ATOMIC_RELAXED), 1);
	CHECK_INT(__atomic_load_n(&st.ctr.lost, __ATOMIC_RELAXED), 0);
	launch(41, INJ_API_LAUNCH, 211, "cudaLaunchKernel");
	a.corr = 41;
	CHECK_INT(inj_add_activity(&st, &a), 0);
	CHECK_INT(__atomic_load_n(&st.ctr.lost, __ATOMIC_RELAXED), 1);
	CHECK_INT(__atomic_load_n(&st.kept, __ATOMIC_RELAXED), 0); /* its window still waits */
	inj_flush(&st);
	CHECK_INT(ngot, 0);
	CHECK_INT(last_ctr.lost, 1);
}

/* The driver call inside a followed runtime call, with an id of its own: one launch
 * probe (the outer call's), and records with either id are told under the outer one. */
TEST(nested_driver_call_follows_outer)
{
	struct inj_activity a = {.kind = DEV_KERNEL, .corr = 51, .start = 100, .end = 600, .name = "k"};

	reset();
	inj_api_enter(&st, 0, INJ_API_LAUNCH, 2, 211, 50, "cudaLaunchKernel");
	inj_api_enter(&st, 0, INJ_API_LAUNCH, 1, 307, 51, "cuLaunchKernel");
	inj_api_exit(&st);
	inj_api_exit(&st);
	CHECK_INT(nlaunch, 1);
	CHECK_INT(last_corr, 50);
	CHECK_INT(last_cbinfo, DEV_CBINFO(2, 211)); /* named after the user's call */
	CHECK(inj_is_sampled(&st, 50));
	CHECK(inj_is_sampled(&st, 51));
	CHECK_INT(st.ctr.launches_seen, 1); /* one user call */
	CHECK_INT(inj_add_activity(&st, &a), 1);
	a.corr = 50;
	CHECK_INT(inj_add_activity(&st, &a), 1);
	inj_flush(&st);
	CHECK_INT(ngot, 2);
	CHECK_INT(got[0].corr, 50);
	CHECK_INT(got[1].corr, 50);
	/* the same id for both, as on a real driver: one probe, the record under it */
	inj_api_enter(&st, 0, INJ_API_LAUNCH, 2, 211, 52, "cudaLaunchKernel");
	inj_api_enter(&st, 0, INJ_API_LAUNCH, 1, 307, 52, "cuLaunchKernel");
	inj_api_exit(&st);
	inj_api_exit(&st);
	CHECK_INT(nlaunch, 2);
	a.corr = 52;
	CHECK_INT(inj_add_activity(&st, &a), 1);
	inj_flush(&st);
	CHECK_INT(got[2].corr, 52);
	/* a later, unnested call whose id lands in the slot: under its own id */
	launch(51 + INJ_SAMPLED_SLOTS, INJ_API_LAUNCH, 211, "cudaLaunchKernel");
	a.corr = 51 + INJ_SAMPLED_SLOTS;
	CHECK_INT(inj_add_activity(&st, &a), 1);
	inj_flush(&st);
	CHECK_INT(got[3].corr, 51 + INJ_SAMPLED_SLOTS);
}

TEST(sampling_one_in_n_and_windows)
{
	int followed = 0;

	reset();
	st.every_n = 10;
	for (uint32_t i = 1; i <= 20000; i++) {
		launch(i, INJ_API_LAUNCH, 211, "cudaLaunchKernel");
		followed += inj_is_sampled(&st, i);
	}
	CHECK_INT(st.ctr.launches_seen, 20000);
	CHECK_INT(st.ctr.launches_sampled, followed);
	CHECK(followed > 1700 && followed < 2300);
	st.window_open = false;
	launch(30000, INJ_API_LAUNCH, 211, "cudaLaunchKernel");
	CHECK(!inj_is_sampled(&st, 30000));
	CHECK_INT(st.ctr.launches_seen, 20001);
}

TEST(batches_split_at_max)
{
	struct inj_activity a = {.kind = DEV_MEMSET, .corr = 8, .start = 0, .end = 1, .bytes = 1};

	reset();
	launch(8, INJ_API_COPY, 51, "cudaMemsetAsync");
	for (int i = 0; i < DEV_BATCH_MAX + 5; i++)
		inj_add_activity(&st, &a);
	CHECK_INT(nbatches, 1);
	inj_flush(&st);
	CHECK_INT(nbatches, 2);
	CHECK_INT(ngot, DEV_BATCH_MAX + 5);
}

TEST(gpubpf_side_helpers)
{
	struct cupti_range r[2] = {{0x1000, 0x2000}, {0x5000, 0x6000}};
	uint64_t ips[5] = {0x1100, 0x5100, 0x1200, 0x9000, 0x1300};

	CHECK_INT(cupti__internal_frames(ips, 5, r, 2), 3);
	CHECK_INT(cupti__internal_frames(ips + 3, 2, r, 2), 0);
	CHECK_INT(cupti__internal_frames(ips, 0, r, 2), 0);
	CHECK(cupti__scale(100, 10) == 10.0);
	CHECK(cupti__scale(10, 10) == 1.0);
	CHECK(cupti__scale(10, 0) == 1.0);
	CHECK(cupti__internal_object("libcupti.so.13"));
	CHECK(cupti__internal_object("libgpubpf_inject.so"));
	CHECK(cupti__internal_object("libcuda.so.1"));
	CHECK(!cupti__internal_object("libcudnn.so.9"));
	CHECK(!cupti__internal_object("python3.11"));
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(classify);
	RUN(kernel_record_kept_with_name);
	RUN(records_tell_who_set_the_pace);
	RUN(names_announced_again_each_attach);
	RUN(name_at_a_reused_pointer_after_finalize);
	RUN(launch_handles_named_once_per_attach);
	RUN(memcpy_and_memset);
	RUN(graph_kernels_share_the_launch);
	RUN(unsampled_and_invalid_dropped);
	RUN(losses_told_without_a_record);
	RUN(untimed_record_lost_only_if_followed);
	RUN(nested_driver_call_follows_outer);
	RUN(sampling_one_in_n_and_windows);
	RUN(batches_split_at_max);
	RUN(gpubpf_side_helpers);
	inj_state_fini(&st);
	return T_END();
}
