/* SPDX-License-Identifier: MIT */
/* Find many function symbols of one ELF object, in one pass over its .symtab and through
 * the .gnu.hash of a large .dynsym (a pass over a small one, or one without), and turn their
 * addresses into the file offsets that uprobes attach to. The object is a target's file:
 * untrusted input, read through libelf and bounded reads, every index checked. */
#ifndef GPUBPF_ELFSYM_H
#define GPUBPF_ELFSYM_H

#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct elfsym_want {
	const char *name; /* in */
	uint64_t offset;  /* out: file offset of the function's entry, 0 = not found */
	uint64_t addr;	  /* out: st_value */
};

/* Look up every wanted name in the object open at FD (defined STT_FUNC/STT_GNU_IFUNC
 * symbols; .symtab wins over .dynsym). Returns how many were found, or a negative errno
 * (-ENOEXEC: not an ELF object). */
int elfsym__lookup_fd(int fd, struct elfsym_want *want, int n);

/* By default .gnu.hash answers for a .dynsym of 4096 symbols or more, and a smaller one is
 * passed over. ELFSYM_SCAN: pass over .dynsym always; ELFSYM_HASH: use the hash whatever
 * its size (tests compare the two). */
#define ELFSYM_SCAN 1u
#define ELFSYM_HASH 2u
/* ELFSYM_CUDART: CUDA's entry points. .symtab is read only where static cudart's may be
 * local to it: an executable, or an object with device code of its own (.nv_fatbin), that
 * is not linked against the shared libcudart. */
#define ELFSYM_CUDART 4u
int elfsym__lookup_fd_flags(int fd, struct elfsym_want *want, int n, unsigned flags);

/* Whether ELF's string table NDX is stored plain (SHT_STRTAB, not SHF_COMPRESSED):
 * elf_strptr inflates a compressed one to the size its header claims (0x3600000000000002
 * bytes in a file fuzz_elfsym made; no toolchain compresses a string table). Every reader
 * of a target's names through elf_strptr asks first. */
bool elfsym__strtab_plain(Elf *elf, size_t ndx);

/* Translate a virtual address of the object at FD into a file offset via its PT_LOAD
 * segments. 0 or -ENOENT. */
int elfsym__addr_to_offset_fd(int fd, uint64_t addr, uint64_t *offset);

#endif /* GPUBPF_ELFSYM_H */
