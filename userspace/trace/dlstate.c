// SPDX-License-Identifier: MIT
/* The dynamic linker's r_state in a target (dlstate.h). */
#define _GNU_SOURCE /* process_vm_readv */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>

#include "dlstate.h"
#include "elfread.h"
#include "elfsym.h"
#include "procmaps.h"

/* struct r_debug (link.h): int r_version; struct link_map *r_map; ElfW(Addr) r_brk;
 * enum r_state; ... on LP64 */
#define R_STATE_OFF 24
#define FILES_MAX 64	    /* dynamic linkers remembered: one or two on a host */
#define SYMS_MAX (1u << 20) /* a bound on a file's symbol tables */

/* _r_debug's st_value, and the address the object's first byte is loaded at (the
 * PT_LOAD at file offset 0), in the object open at FD. */
static int scan(int fd, uint64_t *sym, uint64_t *base)
{
	Elf *e;
	Elf_Scn *scn = NULL;
	size_t nph;
	bool have_base = false;
	int err = -ENOENT;

	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e)
		return -ENOEXEC;
	if (gelf_getclass(e) != ELFCLASS64 || elf_getphdrnum(e, &nph)) {
		err = -ENOEXEC;
		goto out;
	}
	for (size_t i = 0; i < nph && i < 256 && !have_base; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_offset == 0) {
			*base = ph.p_vaddr;
			have_base = true;
		}
	}
	while (have_base && err && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB) ||
		    !sh.sh_entsize || !elfread__symtab(e, scn, fd) || !(data = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize && i < SYMS_MAX; i++) {
			GElf_Sym s;
			const char *name;

			if (!gelf_getsym(data, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_OBJECT ||
			    s.st_shndx == SHN_UNDEF || s.st_size < R_STATE_OFF + 4)
				continue;
			name = elf_strptr(e, sh.sh_link, s.st_name);
			if (name && !strcmp(name, "_r_debug")) {
				*sym = s.st_value;
				err = 0;
				break;
			}
		}
	}
out:
	elf_end(e);
	return err;
}

int dlstate__add_file(struct dlstate *d, int fd)
{
	uint64_t sym = 0, base = 0;
	struct stat st;
	int err;

	if (fstat(fd, &st))
		return -errno;
	if (hmap__get(&d->files, (uint64_t)st.st_dev, (uint64_t)st.st_ino, 0, NULL))
		return 0;
	err = scan(fd, &sym, &base);
	if (err)
		return err;
	if (sym < base)
		return -ENOENT;
	if (d->files.len >= FILES_MAX)
		return -ENOSPC;
	return hmap__put(&d->files, (uint64_t)st.st_dev, (uint64_t)st.st_ino, 0, sym - base + R_STATE_OFF);
}

uint64_t dlstate__addr(const struct dlstate *d, const char *maps)
{
	const char *line = maps;

	if (!d->files.len || !maps)
		return 0;
	while (*line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		struct procmaps_entry e;
		uint64_t rel;

		if (!procmaps__parse_line(line, len, &e) && e.offset == 0 && procmaps__is_file(&e) && !e.deleted &&
		    hmap__get(&d->files, (uint64_t)makedev(e.dev_major, e.dev_minor), e.inode, 0, &rel) &&
		    e.start + rel >= e.start)
			return e.start + rel;
		if (!nl)
			break;
		line = nl + 1;
	}
	return 0;
}

int dlstate__read(pid_t pid, uint64_t addr)
{
	int32_t v;
	struct iovec local = {&v, sizeof(v)}, remote = {(void *)(uintptr_t)addr, sizeof(v)};
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);

	if (n != (ssize_t)sizeof(v))
		return n < 0 ? -errno : -EIO;
	return v >= DL_RT_CONSISTENT && v <= DL_RT_DELETE ? v : -EINVAL;
}

void dlstate__free(struct dlstate *d)
{
	hmap__clear(&d->files);
}
