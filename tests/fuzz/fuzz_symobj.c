// SPDX-License-Identifier: MIT
/* libFuzzer harness: the symbolizer's reading of an object a target maps
 * (userspace/sym/syms_obj.c, syms_dwarf.c): its program headers, build id, symbol tables
 * (.symtab and .dynsym, sorted, sizes filled), and DWARF lines and inlined frames through
 * libdw. The input is the file (in a memfd); addresses at and around each loaded segment
 * and each function found are symbolized. No debug directory is searched. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "syms_int.h"

static void frames_at(struct syms *s, struct obj *o, uint64_t vaddr)
{
	struct frames *fr = sy_obj_frames(s, o, vaddr);
	uint64_t off;

	if (fr && (fr->n < 0 || fr->n > SYMS_MAX_INLINE))
		abort();
	(void)sy_obj_vaddr_to_off(o, vaddr, &off);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct syms *s = syms__new();
	int fd = memfd_create("fuzz_symobj", MFD_CLOEXEC);
	struct obj *o;

	if (!s || fd < 0 || syms__set_debug_dirs(s, "/nonexistent-fuzz") || write(fd, data, size) != (ssize_t)size) {
		if (fd >= 0)
			close(fd);
		syms__free(s);
		return 0;
	}
	o = sy_obj_get(s, fd, -1, NULL); /* takes the fd */
	if (o) {
		(void)sy_obj_load_syms(s, o);
		for (size_t i = 0; i < o->nloads && i < 8; i++) {
			frames_at(s, o, o->loads[i].vaddr);
			frames_at(s, o, o->loads[i].vaddr + o->loads[i].memsz / 2);
		}
		for (size_t i = 0; i < o->nfuncs && i < 16; i++) {
			frames_at(s, o, o->funcs[i].addr);
			frames_at(s, o, o->funcs[i].addr + 1);
		}
	}
	syms__free(s);
	return 0;
}
