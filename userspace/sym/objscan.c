// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "mapsnap.h"
#include "objscan.h"
#include "procmaps.h"
#include "procroot.h"

#define MAPS_MAX_BYTES (64u << 20)

int objscan__pid(int pid, int key_pid, struct hmap *seen, objscan_fn cb, void *ctx)
{
	char *buf = mapsnap__read(pid, MAPS_MAX_BYTES, true, NULL), *line, *save = NULL;

	if (!buf)
		return -errno;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct procmaps_entry e;
		struct procroot_rule rule = {.same_file = true};
		char path[4096];
		size_t len = strlen(line);
		uint64_t dev;
		int ofd;

		if (!procmaps__maybe_exec(line, len) || procmaps__parse_line(line, len, &e) || !e.exec ||
		    !procmaps__is_file(&e) || e.deleted)
			continue;
		dev = makedev(e.dev_major, e.dev_minor);
		if (hmap__get(seen, (uint64_t)key_pid, dev, e.inode, NULL))
			continue;
		if (hmap__put(seen, (uint64_t)key_pid, dev, e.inode, 1) || e.path_len >= sizeof(path))
			continue;
		memcpy(path, e.path, e.path_len);
		path[e.path_len] = '\0';
		/* The file must be the one mapped: a target can replace a path's file. */
		rule.ino = (ino_t)e.inode;
		ofd = procroot__open(pid, path, &rule);
		if (ofd < 0)
			continue;
		cb(ctx, pid, ofd, path);
		close(ofd);
	}
	free(buf);
	return 0;
}
