// SPDX-License-Identifier: MIT
#define _GNU_SOURCE /* SEEK_HOLE */
#include <gelf.h>
#include <libelf.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elfread.h"
#include "elfsym.h"

bool elfread__whole(Elf_Scn *scn, int fd, uint64_t max)
{
	GElf_Shdr sh;
	struct stat st;
	off_t hole;

	if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS || sh.sh_size > max)
		return false;
	if (fd >= 0) {
		if (fstat(fd, &st) || sh.sh_offset > (uint64_t)st.st_size ||
		    sh.sh_size > (uint64_t)st.st_size - sh.sh_offset)
			return false;
		/* (libelf reads by pread: the file's offset is nobody's) */
		hole = sh.sh_size ? lseek(fd, (off_t)sh.sh_offset, SEEK_HOLE) : -1;
		if (hole >= 0 && (uint64_t)hole < sh.sh_offset + sh.sh_size)
			return false;
	}
	if (sh.sh_flags & SHF_COMPRESSED) {
		GElf_Chdr ch;

		/* its header read from the section's bytes, all of them in the file */
		if (!gelf_getchdr(scn, &ch) || ch.ch_size > max)
			return false;
	}
	return true;
}

bool elfread__strtab(Elf *elf, int fd, size_t ndx, uint64_t max)
{
	return elfsym__strtab_plain(elf, ndx) && elfread__whole(elf_getscn(elf, ndx), fd, max);
}

bool elfread__symtab(Elf *elf, Elf_Scn *scn, int fd)
{
	GElf_Shdr sh;

	return scn && gelf_getshdr(scn, &sh) && elfread__whole(scn, fd, ELFREAD_SYMTAB_MAX) &&
	       elfread__strtab(elf, fd, sh.sh_link, ELFREAD_STRTAB_MAX);
}

/* ELF's section-name table, in *NDX, where it can be read whole (elf_strptr and libelf's
 * and libdw's lookups by name read it so): plain, at most what such a table holds. */
bool elfread__shstrtab(Elf *elf, size_t *ndx)
{
	GElf_Shdr sh;

	return !elf_getshdrstrndx(elf, ndx) && elfsym__strtab_plain(elf, *ndx) &&
	       gelf_getshdr(elf_getscn(elf, *ndx), &sh) && sh.sh_size <= ELFREAD_SHSTRTAB_MAX;
}

/* The name of the section after *SCN (its header in *SH, *SCN moved on to it), skipping
 * those without one; NULL at the end. */
static const char *next_named(Elf *elf, size_t shstrndx, Elf_Scn **scn, GElf_Shdr *sh)
{
	while ((*scn = elf_nextscn(elf, *scn))) {
		const char *n = gelf_getshdr(*scn, sh) ? elf_strptr(elf, shstrndx, sh->sh_name) : NULL;

		if (n)
			return n;
	}
	return NULL;
}

/* ELF's section NAME (PROGBITS: one with bytes in the file), or NULL. */
Elf_Scn *elfread__section(Elf *elf, const char *name, bool progbits)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	GElf_Shdr sh;
	const char *n;

	if (!elfread__shstrtab(elf, &shstrndx))
		return NULL;
	while ((n = next_named(elf, shstrndx, &scn, &sh)))
		if (!strcmp(n, name) && (!progbits || sh.sh_type != SHT_NOBITS))
			return scn;
	return NULL;
}

/* Whether ELF's notes can be read whole (libdw's build-id lookup reads each PT_NOTE segment
 * and SHT_NOTE section so): a real one is a few hundred bytes. */
bool elfread__notes(Elf *elf)
{
	Elf_Scn *scn = NULL;
	size_t nph;

	if (elf_getphdrnum(elf, &nph))
		return false;
	for (size_t i = 0; i < nph && i < ELFREAD_MAX_PHDRS; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_NOTE && ph.p_filesz > ELFREAD_NOTES_MAX)
			return false;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_NOTE && sh.sh_size > ELFREAD_NOTES_MAX)
			return false;
	}
	return true;
}

bool elfread__dwarf(Elf *elf, int fd)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;
	GElf_Shdr sh;
	const char *n;

	if (!elfread__shstrtab(elf, &shstrndx))
		return false;
	while ((n = next_named(elf, shstrndx, &scn, &sh))) {
		if (sh.sh_type == SHT_NOBITS || (strncmp(n, ".debug_", 7) && strncmp(n, ".zdebug_", 8)))
			continue;
		if (!elfread__whole(scn, fd, ELFREAD_DWARF_MAX))
			return false;
		/* GNU's older compression: "ZLIB" and the inflated size, big-endian */
		if (!strncmp(n, ".zdebug_", 8)) {
			unsigned char h[12];
			uint64_t size = 0;

			if (fd < 0 || pread(fd, h, sizeof(h), (off_t)sh.sh_offset) != (ssize_t)sizeof(h) ||
			    memcmp(h, "ZLIB", 4))
				return false;
			for (int i = 4; i < 12; i++)
				size = size << 8 | h[i];
			if (size > ELFREAD_DWARF_MAX)
				return false;
		}
	}
	return true;
}
