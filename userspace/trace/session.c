// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "procs.h"
#include "python.h"
#include "hmap.h"
#include "session.h"

/* (pid, tid, names) -> labels. Threads are few compared to samples; a small
 * open-addressing table. */
struct name_ent {
	uint32_t tid; /* 0 = empty */
	uint32_t pid;
	uint32_t names; /* the names' hash the samples carry (struct comm_key), 0: latest */
	char tid_str[12], pid_str[12];
	char comm[24], pcomm[24]; /* room for "[tid 4294967295]" */
};

/* (tid, pid, names hash) -> its struct name_ent, allocated on its own */
static struct hmap names;

void session__names_free(void)
{
	hmap_for_each(&names, e) free((void *)(uintptr_t)e->val);
	hmap__clear(&names);
}

static void read_comm_file(uint32_t pid, uint32_t tid, char *out, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	if (tid)
		snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", pid, tid);
	else
		snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, out, len - 1);
	close(fd);
	if (n <= 0)
		return;
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
}

static struct name_ent *name_lookup(struct session *s, uint32_t pid, uint32_t tid, uint32_t nh)
{
	struct comm_key k;
	struct gpubpf_comm c;
	struct name_ent *e;
	uint64_t v;

	if (!tid)
		tid = pid ? pid : 0xffffffffu;
	if (hmap__get(&names, tid, pid, nh, &v))
		return (struct name_ent *)(uintptr_t)v;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	if (hmap__put(&names, tid, pid, nh, (uintptr_t)e)) {
		free(e);
		return NULL;
	}
	e->tid = tid;
	e->pid = pid;
	e->names = nh;
	snprintf(e->tid_str, sizeof(e->tid_str), "%u", tid);
	snprintf(e->pid_str, sizeof(e->pid_str), "%u", pid);
	/* The names the thread had when sampled; else its latest; else what /proc says. */
	k = (struct comm_key){.tid = tid, .names = nh};
	if (s->comms_fd >= 0 && (bpf_map_lookup_elem(s->comms_fd, &k, &c) == 0 ||
				 (k.names = 0, bpf_map_lookup_elem(s->comms_fd, &k, &c) == 0 && c.tgid == pid))) {
		memcpy(e->comm, c.comm, sizeof(c.comm) - 1);
		memcpy(e->pcomm, c.pcomm, sizeof(c.pcomm) - 1);
	}
	if (!e->comm[0])
		read_comm_file(pid, tid, e->comm, sizeof(e->comm));
	if (!e->pcomm[0])
		read_comm_file(pid, 0, e->pcomm, sizeof(e->pcomm));
	if (!e->comm[0])
		snprintf(e->comm, sizeof(e->comm), "[tid %u]", tid);
	if (!e->pcomm[0])
		snprintf(e->pcomm, sizeof(e->pcomm), "[pid %u]", pid);
	return e;
}

int session__labels_at(struct session *s, uint32_t pid, uint32_t tid, uint32_t nh, struct prof_label *l)
{
	struct name_ent *e = name_lookup(s, pid, tid, nh);

	if (!e)
		return -ENOMEM;
	memset(l, 0, sizeof(*l) * SESSION_LABELS);
	l[0].key = "pid";
	l[0].str = e->pid_str;
	l[1].key = "tid";
	l[1].str = e->tid_str;
	l[2].key = "thread_name";
	l[2].str = e->comm;
	l[3].key = "process_name";
	l[3].str = e->pcomm;
	return 0;
}

int session__labels(struct session *s, uint32_t pid, uint32_t tid, struct prof_label *l)
{
	return session__labels_at(s, pid, tid, 0, l);
}

int session__add_stack_sample(struct session *s, uint32_t pid, uint32_t tid, const uint64_t *kips, int nk,
			      const uint64_t *uips, int nu, const struct prof_frame *leaf, int nleaf,
			      const struct prof_label *extra, int nextra, const int64_t *values)
{
	return session__add_stack_sample_py(s, pid, tid, 0, kips, nk, uips, nu, -1, leaf, nleaf, extra, nextra, values);
}

int session__add_stack_sample_py(struct session *s, uint32_t pid, uint32_t tid, uint32_t names, const uint64_t *kips,
				 int nk, const uint64_t *uips, int nu, int32_t pystack, const struct prof_frame *leaf,
				 int nleaf, const struct prof_label *extra, int nextra, const int64_t *values)
{
	struct prof_frame frames[PROFILE_MAX_FRAMES];
	struct prof_label labels[PROFILE_MAX_LABELS];
	int n = 0, nl, err, ustart;

	err = session__labels_at(s, pid, tid, names, labels);
	if (err)
		return err;
	nl = SESSION_LABELS;
	for (int i = 0; i < nextra && nl < PROFILE_MAX_LABELS; i++)
		labels[nl++] = extra[i];

	for (int i = 0; i < nleaf && n < PROFILE_MAX_FRAMES; i++)
		frames[n++] = leaf[i];
	for (int i = 0; i < nk && n < PROFILE_MAX_FRAMES; i++) {
		frames[n] = (struct prof_frame){.kind = PROF_FRAME_KERNEL, .addr = kips[i] - (i > 0)};
		n++;
	}
	ustart = n;
	for (int i = 0; i < nu && n < PROFILE_MAX_FRAMES; i++) {
		/* ips[0] is the interrupted or probed instruction itself (a uprobe's is the
		 * function entry, where -1 would land in the previous function); the rest
		 * are return addresses, moved back into the call instruction. */
		frames[n] = (struct prof_frame){.kind = PROF_FRAME_USER, .addr = uips[i] - (i > 0)};
		n++;
	}
	if (s->py && pystack >= 0) {
		/* Python: the user frames (after the leaf and kernel ones) become a merge of
		 * native and Python frames, as location ids. */
		uint32_t ids[PROFILE_MAX_FRAMES];
		int nfix = ustart, m;

		if (s->opts->all)
			python__note_pid(s->py, (int)pid);
		m = python__frames(s->py, (int)pid, pystack, frames + nfix, n - nfix, ids + nfix,
				   PROFILE_MAX_FRAMES - nfix);
		if (m >= 0) {
			for (int i = 0; i < nfix; i++) {
				err = profile__location_id(s->prof, (int)pid, &frames[i], &ids[i]);
				if (err)
					return err;
			}
			return profile__add_sample_locs(s->prof, (int)pid, (int)tid, ids, nfix + m, labels, nl, values);
		}
		if (m != -ENOENT)
			return m;
	} else if (s->py && s->opts->all) {
		python__note_pid(s->py, (int)pid);
	}
	if (n == 0)
		frames[n++] = (struct prof_frame){.kind = PROF_FRAME_SYNTH, .name = "[stack lost]"};
	return profile__add_sample(s->prof, (int)pid, (int)tid, frames, n, labels, nl, values);
}

int session__share_maps(struct session *s, struct bpf_object *obj, int targets_fd, int comms_fd)
{
	struct bpf_map *targets = bpf_object__find_map_by_name(obj, "targets");
	struct bpf_map *comms = bpf_object__find_map_by_name(obj, "comms");
	int err;

	if (!targets || !comms)
		return -ENOENT;
	/* One target set and one comms map for every BPF object of the session. */
	err = bpf_map__reuse_fd(targets, targets_fd);
	if (!err)
		err = bpf_map__reuse_fd(comms, comms_fd);
	/* Python maps shared, or shrunk when Python frames are off. */
	if (!err && bpf_object__find_map_by_name(obj, "py_procs"))
		err = python__prepare(s->py, obj);
	return err;
}
