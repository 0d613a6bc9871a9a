/* SPDX-License-Identifier: MIT */
/* What of a target's ELF file may be read whole. libelf reads a section into memory at
 * once (elf_getdata, elf_strptr, its lookups by name), libdw each DWARF section, inflating
 * a compressed one to the size its header claims, and a target's file is untrusted: a
 * sparse one claims gigabytes that cost its maker no disk (a 3 GiB .shstrtab in 16 KiB of
 * blocks took gpubpf to 3 GiB resident). Every reader asks here first. */
#ifndef GPUBPF_ELFREAD_H
#define GPUBPF_ELFREAD_H

#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most a section may hold: a symbol table of 32 Mi symbols, a string table, a DWARF
 * section (inflated), a section-name table, a note (a build id is a few dozen bytes). */
#define ELFREAD_SYMTAB_MAX ((uint64_t)(32u << 20) * 24)
#define ELFREAD_STRTAB_MAX (1ull << 30)
#define ELFREAD_DWARF_MAX (1ull << 30)
#define ELFREAD_SHSTRTAB_MAX (1u << 20)
#define ELFREAD_NOTES_MAX (1u << 20)
#define ELFREAD_MAX_PHDRS 1024

/* Whether section SCN of the file open at FD may be read whole: its bytes in the file, at
 * most MAX of them (inflated, where compressed), and no hole among them (no toolchain
 * writes one into a table or DWARF). FD < 0: an image in memory (the vDSO's), all of
 * whose bytes are there: the size alone. */
bool elfread__whole(Elf_Scn *scn, int fd, uint64_t max);

/* Whether string table NDX of ELF (open at FD) is stored plain (elfsym__strtab_plain) and
 * may be read whole, at most MAX bytes: elf_strptr reads a table whole. */
bool elfread__strtab(Elf *elf, int fd, size_t ndx, uint64_t max);

/* Whether symbol table SCN of ELF (open at FD) and its names (sh_link, stored plain:
 * elfsym__strtab_plain) may both be read whole. */
bool elfread__symtab(Elf *elf, Elf_Scn *scn, int fd);

/* ELF's section-name table, in *NDX, where it can be read whole: plain, at most
 * ELFREAD_SHSTRTAB_MAX. */
bool elfread__shstrtab(Elf *elf, size_t *ndx);

/* ELF's section NAME (PROGBITS: one with bytes in the file), or NULL (none, or names that
 * cannot be read whole). */
Elf_Scn *elfread__section(Elf *elf, const char *name, bool progbits);

/* Whether ELF's notes (each PT_NOTE segment and SHT_NOTE section, which libdw's build-id
 * lookup reads whole) are at most ELFREAD_NOTES_MAX. */
bool elfread__notes(Elf *elf);

/* Whether every DWARF section of ELF (open at FD) may be read whole, inflated included
 * (.debug_* by elfread__whole, .zdebug_* by the size in their "ZLIB" header). */
bool elfread__dwarf(Elf *elf, int fd);

#endif /* GPUBPF_ELFREAD_H */
