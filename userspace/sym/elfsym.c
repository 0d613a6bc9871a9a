// SPDX-License-Identifier: MIT
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>

#include "elfsym.h"

/* Files are read with ELF_C_READ (pread), never mapped: the files are the targets', and a
 * target that truncates one while we read it would kill gpubpf with SIGBUS through a
 * mapping (the symbolizer's policy too, syms.c). */

/* Wanted names in a small open-addressing table: libraries like libtorch_cuda have
 * millions of symbols, so each must cost one hash and (rarely) one strcmp. */
#define WANT_SLOTS 512

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
	return h;
}

static int find_want(const int *slots, const struct elfsym_want *want, const char *name)
{
	for (uint64_t i = hash_str(name) % WANT_SLOTS;; i = (i + 1) % WANT_SLOTS) {
		int idx = slots[i];

		if (idx < 0)
			return -1;
		if (!strcmp(want[idx].name, name))
			return idx;
	}
}

static int load_offset(Elf *elf, uint64_t addr, uint64_t *off)
{
	size_t nph;

	if (elf_getphdrnum(elf, &nph))
		return -ENOEXEC;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		if (addr >= ph.p_vaddr && addr - ph.p_vaddr < ph.p_filesz) {
			*off = addr - ph.p_vaddr + ph.p_offset;
			return 0;
		}
	}
	return -ENOENT;
}

static int scan(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, const int *slots, struct elfsym_want *want, int *found)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t count;

	if (!data || !sh->sh_entsize)
		return 0;
	count = sh->sh_size / sh->sh_entsize;
	for (size_t i = 0; i < count; i++) {
		GElf_Sym sym;
		const char *name;
		int idx, type;

		if (!gelf_getsym(data, (int)i, &sym))
			break;
		type = GELF_ST_TYPE(sym.st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF || !sym.st_value)
			continue;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!name || !*name)
			continue;
		idx = find_want(slots, want, name);
		if (idx < 0 || want[idx].offset)
			continue;
		if (load_offset(elf, sym.st_value, &want[idx].offset) == 0) {
			want[idx].addr = sym.st_value;
			(*found)++;
		}
	}
	return 0;
}

int elfsym__lookup_fd(int fd, struct elfsym_want *want, int n)
{
	int slots[WANT_SLOTS], found = 0;
	Elf_Scn *scn = NULL;
	Elf *elf;

	if (n <= 0 || n > WANT_SLOTS / 2)
		return -EINVAL;
	memset(slots, -1, sizeof(slots));
	for (int i = 0; i < n; i++) {
		uint64_t h = hash_str(want[i].name) % WANT_SLOTS;

		want[i].offset = 0;
		want[i].addr = 0;
		while (slots[h] >= 0)
			h = (h + 1) % WANT_SLOTS;
		slots[h] = i;
	}
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		elf_end(elf);
		return -ENOEXEC;
	}
	/* .symtab first: static cudart's entry points are local to the executable's .symtab,
	 * and a name there is at least as precise as the exported one. */
	for (int pass = 0; pass < 2; pass++) {
		scn = NULL;
		while ((scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;

			if (!gelf_getshdr(scn, &sh))
				continue;
			if (sh.sh_type == (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM))
				scan(elf, scn, &sh, slots, want, &found);
		}
	}
	elf_end(elf);
	return found;
}

int elfsym__addr_to_offset_fd(int fd, uint64_t addr, uint64_t *offset)
{
	Elf *elf;
	int err;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		elf_end(elf);
		return -ENOEXEC;
	}
	err = load_offset(elf, addr, offset);
	elf_end(elf);
	return err;
}
