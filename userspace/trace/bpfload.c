// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpfload.h"
#include "log.h"

uint64_t bpfload__now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void bpfload__report(const struct bpf_object *obj, const char *what, uint64_t t0)
{
	char progs[512];
	size_t len = 0;
	struct bpf_program *p;

	progs[0] = '\0';
	bpf_object__for_each_program(p, obj)
	{
		struct bpf_prog_info info;
		__u32 sz = sizeof(info);
		int fd = bpf_program__fd(p), n;

		if (fd < 0 || len >= sizeof(progs))
			continue;
		memset(&info, 0, sizeof(info));
		if (bpf_prog_get_info_by_fd(fd, &info, &sz))
			continue;
		n = snprintf(progs + len, sizeof(progs) - len, "%s%s %u", len ? ", " : "", bpf_program__name(p),
			     info.verified_insns);
		if (n > 0)
			len += (size_t)n;
	}
	pr_debug("BPF %s: loaded in %.1f ms; instructions verified: %s", what, (double)(bpfload__now() - t0) / 1e6,
		 len ? progs : "(none)");
}
