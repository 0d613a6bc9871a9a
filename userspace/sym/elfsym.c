// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdbool.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elfread.h"
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

/* The first two bytes of every wanted name, as bits: most of a large object's names (C++'s
 * "_Z...") are turned away on them before any hash. */
struct wanted {
	int slots[WANT_SLOTS];
	uint64_t lead[65536 / 64];
	struct elfsym_want *want;
	int n, found;
};

static unsigned lead_of(const char *s)
{
	return (unsigned char)s[0] | (s[0] ? (unsigned)(unsigned char)s[1] << 8 : 0);
}

static bool lead_wanted(const struct wanted *w, const char *s)
{
	unsigned k = lead_of(s);

	return w->lead[k / 64] >> (k % 64) & 1;
}

static bool sym_defines_function(const GElf_Sym *sym)
{
	int type = GELF_ST_TYPE(sym->st_info);

	return (type == STT_FUNC || type == STT_GNU_IFUNC) && sym->st_shndx != SHN_UNDEF && sym->st_value;
}

/* Record SYM for wanted entry IDX unless it already has one. */
static void take(Elf *elf, struct wanted *w, int idx, const GElf_Sym *sym)
{
	struct elfsym_want *e = &w->want[idx];

	if (e->offset)
		return;
	/* Offset 0 is the ELF header, never a function, and reads as "not found". */
	if (load_offset(elf, sym->st_value, &e->offset) == 0 && e->offset) {
		e->addr = sym->st_value;
		w->found++;
	}
}

static void scan(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, struct wanted *w)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t count;

	if (!data || !sh->sh_entsize)
		return;
	count = sh->sh_size / sh->sh_entsize;
	for (size_t i = 0; i < count && w->found < w->n; i++) {
		GElf_Sym sym;
		const char *name;
		int idx;

		if (!gelf_getsym(data, (int)i, &sym))
			break;
		if (!sym_defines_function(&sym))
			continue;
		name = elf_strptr(elf, sh->sh_link, sym.st_name);
		if (!name || !*name || !lead_wanted(w, name))
			continue;
		idx = find_want(w->slots, w->want, name);
		if (idx >= 0)
			take(elf, w, idx, &sym);
	}
}

/* ---- .gnu.hash lookups ----
 * A stripped library has only .dynsym, and its .gnu.hash finds a name without reading the
 * table: a few small reads a wanted name instead of every symbol and every string (a
 * PyTorch library's are tens of MB, read while the target is held). Every read is bounded
 * by the sections' sizes; a table that does not add up falls back to the scan. */

#define HASH_CHAIN_MAX 4096
#define HASH_MIN_SYMS 4096 /* fewer dynamic symbols: the pass (below) */

struct hashed {
	int fd;
	uint64_t hash_off, hash_size; /* .gnu.hash */
	uint64_t sym_off, nsyms;      /* .dynsym, Elf64_Sym entries */
	uint64_t str_off, str_size;   /* its .dynstr */
	uint32_t nbuckets, symoffset, maskwords, shift;
};

static int read_at(int fd, uint64_t off, void *buf, size_t len)
{
	ssize_t got = pread(fd, buf, len, (off_t)off);

	return got == (ssize_t)len ? 0 : -EIO;
}

/* Read the hash's own bytes [OFF, OFF + LEN) of .gnu.hash. */
static int hash_read(const struct hashed *h, uint64_t off, void *buf, size_t len)
{
	if (off > h->hash_size || len > h->hash_size - off)
		return -EINVAL;
	return read_at(h->fd, h->hash_off + off, buf, len);
}

static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;

	while (*s)
		h = h * 33 + (unsigned char)*s++;
	return h;
}

/* Does dynamic symbol I carry NAME (LEN bytes)? */
static int name_is(const struct hashed *h, uint32_t st_name, const char *name, size_t len)
{
	char buf[256];

	if (len + 1 > sizeof(buf) || st_name >= h->str_size || len + 1 > h->str_size - st_name)
		return 0;
	if (read_at(h->fd, h->str_off + st_name, buf, len + 1))
		return -EIO;
	return !memcmp(buf, name, len) && !buf[len];
}

/* Look NAME up; 1 with *SYM filled when a defined function carries it, 0 when none does,
 * negative when the table is malformed. */
static int hash_lookup(const struct hashed *h, const char *name, GElf_Sym *out)
{
	uint64_t bloom, mask, bit1, bit2, chain_at;
	uint32_t hv = gnu_hash(name), bucket;
	size_t len = strlen(name);

	if (hash_read(h, 16 + (uint64_t)(hv / 64 % h->maskwords) * 8, &bloom, 8))
		return -EINVAL;
	bit1 = 1ULL << (hv % 64);
	bit2 = 1ULL << ((hv >> h->shift) % 64);
	mask = bit1 | bit2;
	if ((bloom & mask) != mask)
		return 0;
	if (hash_read(h, 16 + (uint64_t)h->maskwords * 8 + (uint64_t)(hv % h->nbuckets) * 4, &bucket, 4))
		return -EINVAL;
	if (!bucket)
		return 0;
	if (bucket < h->symoffset)
		return -EINVAL;
	chain_at = 16 + (uint64_t)h->maskwords * 8 + (uint64_t)h->nbuckets * 4;
	/* A linker's chains hold a few names each; a file whose chain runs on for thousands
	 * (a read each) is given to the scan instead. */
	for (uint64_t i = bucket; i < h->nsyms && i - bucket < HASH_CHAIN_MAX; i++) {
		uint32_t chain;
		Elf64_Sym sym;

		if (hash_read(h, chain_at + (i - h->symoffset) * 4, &chain, 4))
			return -EINVAL;
		if ((chain | 1) == (hv | 1)) {
			int is;

			if (read_at(h->fd, h->sym_off + i * sizeof(sym), &sym, sizeof(sym)))
				return -EIO;
			is = name_is(h, sym.st_name, name, len);
			if (is < 0)
				return is;
			if (is) {
				*out = (GElf_Sym){.st_name = sym.st_name,
						  .st_info = sym.st_info,
						  .st_other = sym.st_other,
						  .st_shndx = sym.st_shndx,
						  .st_value = sym.st_value,
						  .st_size = sym.st_size};
				if (sym_defines_function(out))
					return 1;
			}
		}
		if (chain & 1)
			return 0;
	}
	return -EINVAL; /* a chain that runs off the table, or on too long */
}

/* Fill H from the .gnu.hash whose header is HSH, or -ENOTSUP/-EINVAL when it cannot serve. */
static int hashed_open(Elf *elf, int fd, const GElf_Shdr *hsh, struct hashed *h)
{
	GElf_Shdr dsh, ssh;
	uint32_t hdr[4];
	Elf_Scn *dscn, *sscn;
	char *ident = elf_getident(elf, NULL);
	uint64_t need;

	if (!ident || ident[EI_CLASS] != ELFCLASS64 || ident[EI_DATA] != ELFDATA2LSB ||
	    __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__)
		return -ENOTSUP;
	dscn = elf_getscn(elf, hsh->sh_link);
	if (!dscn || !gelf_getshdr(dscn, &dsh) || dsh.sh_type != SHT_DYNSYM || dsh.sh_entsize != sizeof(Elf64_Sym))
		return -EINVAL;
	sscn = elf_getscn(elf, dsh.sh_link);
	if (!sscn || !gelf_getshdr(sscn, &ssh) || ssh.sh_type != SHT_STRTAB)
		return -EINVAL;
	*h = (struct hashed){.fd = fd,
			     .hash_off = hsh->sh_offset,
			     .hash_size = hsh->sh_size,
			     .sym_off = dsh.sh_offset,
			     .nsyms = dsh.sh_size / sizeof(Elf64_Sym),
			     .str_off = ssh.sh_offset,
			     .str_size = ssh.sh_size};
	if (hash_read(h, 0, hdr, sizeof(hdr)))
		return -EINVAL;
	h->nbuckets = hdr[0];
	h->symoffset = hdr[1];
	h->maskwords = hdr[2];
	h->shift = hdr[3];
	if (!h->nbuckets || !h->maskwords || h->shift >= 32 || h->symoffset > h->nsyms)
		return -EINVAL;
	need = 16 + (uint64_t)h->maskwords * 8 + (uint64_t)h->nbuckets * 4 + (h->nsyms - h->symoffset) * 4;
	return need <= h->hash_size ? 0 : -EINVAL;
}

/* Look every name not yet found up through the hash. Negative: use the scan instead
 * (what was found stays: each is a defined function of that name). */
static int hash_all(Elf *elf, const struct hashed *h, struct wanted *w)
{
	for (int i = 0; i < w->n && w->found < w->n; i++) {
		GElf_Sym sym;
		int r;

		if (w->want[i].offset)
			continue;
		r = hash_lookup(h, w->want[i].name, &sym);
		if (r < 0)
			return r;
		if (r)
			take(elf, w, i, &sym);
	}
	return 0;
}

/* ---- Where static cudart can hide ----
 * An unstripped object's .symtab is read whole (a rustc's libLLVM: 258k symbols, 20 MB of
 * names, 12 ms, in the hold of a started command). The CUDA scan needs it only where
 * static cudart's entry points may be local: an executable (nvcc links cudart statically
 * by default), or a library with CUDA device code of its own (nvcc -shared, its cudart
 * hidden). Either one linked against the shared libcudart calls it there instead. */

/* Whether the object has a dynamic dependency on the shared libcudart. DYN: its .dynamic
 * section, read by bounded reads of its entries (libelf would allocate the size its header
 * claims: fuzz_elfsym asked it for 0x36...02 bytes), each name read alone (bounded by
 * .dynstr), not the whole .dynstr. A 64-bit little-endian object's only (CUDA's); for any
 * other the answer is no, and its .symtab is read. */
#define DYN_MAX 4096 /* entries: a real .dynamic has a few dozen */
static bool needs_libcudart(Elf *elf, int fd, const GElf_Shdr *dyn_sh)
{
	static const char want[] = "libcudart.so";
	Elf_Scn *strs = elf_getscn(elf, dyn_sh->sh_link);
	const char *ident = elf_getident(elf, NULL);
	size_t n = dyn_sh->sh_size / sizeof(Elf64_Dyn);
	Elf64_Dyn d[64];
	GElf_Shdr str_sh;
	char name[sizeof(want)];

	if (!ident || ident[EI_CLASS] != ELFCLASS64 || ident[EI_DATA] != ELFDATA2LSB || !strs ||
	    !gelf_getshdr(strs, &str_sh) || str_sh.sh_type != SHT_STRTAB)
		return false;
	for (size_t i = 0; i < n && i < DYN_MAX; i += 64) {
		size_t k = n - i < 64 ? n - i : 64;

		if (read_at(fd, dyn_sh->sh_offset + i * sizeof(Elf64_Dyn), d, k * sizeof(Elf64_Dyn)))
			return false;
		for (size_t j = 0; j < k; j++) {
			if (d[j].d_tag == DT_NULL)
				return false;
			if (d[j].d_tag != DT_NEEDED || d[j].d_un.d_val >= str_sh.sh_size ||
			    str_sh.sh_size - d[j].d_un.d_val < sizeof(want) - 1)
				continue;
			if (read_at(fd, str_sh.sh_offset + d[j].d_un.d_val, name, sizeof(want) - 1) == 0 &&
			    !memcmp(name, want, sizeof(want) - 1))
				return true;
		}
	}
	return false;
}

static bool is_executable(Elf *elf)
{
	GElf_Ehdr eh;
	size_t nph;

	if (!gelf_getehdr(elf, &eh))
		return false;
	if (eh.e_type == ET_EXEC)
		return true;
	if (elf_getphdrnum(elf, &nph))
		return false;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_INTERP)
			return true;
	}
	return false;
}

bool elfsym__strtab_plain(Elf *elf, size_t ndx)
{
	Elf_Scn *scn = ndx ? elf_getscn(elf, ndx) : NULL;
	GElf_Shdr sh;

	return scn && gelf_getshdr(scn, &sh) && sh.sh_type == SHT_STRTAB && !(sh.sh_flags & SHF_COMPRESSED);
}

/* A section of CUDA device code (nvcc's fat binaries). */
static bool is_fatbin(Elf *elf, size_t shstrndx, const GElf_Shdr *sh)
{
	const char *name = shstrndx ? elf_strptr(elf, shstrndx, sh->sh_name) : NULL;

	return name && (!strcmp(name, ".nv_fatbin") || !strcmp(name, ".nvFatBinSegment"));
}

int elfsym__lookup_fd_flags(int fd, struct elfsym_want *want, int n, unsigned flags)
{
	Elf_Scn *scn = NULL, *symtab = NULL, *dynsym = NULL, *gnuhash = NULL, *dyn = NULL;
	GElf_Shdr symtab_sh = {0}, dynsym_sh = {0}, gnuhash_sh = {0}, dyn_sh = {0};
	size_t shstrndx = 0;
	bool fatbin = false;
	struct wanted *w;
	Elf *elf;
	int ret;

	if (n <= 0 || n > WANT_SLOTS / 2)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->want = want;
	w->n = n;
	memset(w->slots, -1, sizeof(w->slots));
	for (int i = 0; i < n; i++) {
		uint64_t h = hash_str(want[i].name) % WANT_SLOTS;
		unsigned k = lead_of(want[i].name);

		want[i].offset = 0;
		want[i].addr = 0;
		while (w->slots[h] >= 0)
			h = (h + 1) % WANT_SLOTS;
		w->slots[h] = i;
		w->lead[k / 64] |= 1ULL << (k % 64);
	}
	ret = -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		goto out;
	ret = -ENOEXEC;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF) {
		elf_end(elf);
		goto out;
	}
	/* section names only from a .shstrtab that the file holds (libelf would allocate
	 * what its header claims) */
	if (elf_getshdrstrndx(elf, &shstrndx) || !elfread__strtab(elf, fd, shstrndx, ELFREAD_SHSTRTAB_MAX))
		shstrndx = 0;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_PROGBITS && (flags & ELFSYM_CUDART) && !fatbin)
			fatbin = is_fatbin(elf, shstrndx, &sh);
		if (sh.sh_type == SHT_DYNAMIC && !dyn) {
			dyn = scn;
			dyn_sh = sh;
		} else if (sh.sh_type == SHT_SYMTAB && !symtab) {
			symtab = scn;
			symtab_sh = sh;
		} else if (sh.sh_type == SHT_DYNSYM && !dynsym) {
			dynsym = scn;
			dynsym_sh = sh;
		} else if (sh.sh_type == SHT_GNU_HASH && !gnuhash) {
			gnuhash = scn;
			gnuhash_sh = sh;
		}
	}
	/* .symtab first: static cudart's entry points are local to the executable's .symtab,
	 * and a name there is at least as precise as the exported one. */
	if (symtab && (flags & ELFSYM_CUDART) &&
	    (!(fatbin || is_executable(elf)) || (dyn && needs_libcudart(elf, fd, &dyn_sh))))
		symtab = NULL;
	if (symtab && elfread__symtab(elf, symtab, fd))
		scan(elf, symtab, &symtab_sh, w);
	if (dynsym && w->found < n) {
		struct hashed h;
		bool hashed = false;

		/* A small table is passed over faster than its names are looked up (a few reads
		 * each): libcudart's 250 names, 0.035 ms by the pass, 0.35 ms by the hash. */
		bool large = dynsym_sh.sh_entsize && dynsym_sh.sh_size / dynsym_sh.sh_entsize >= HASH_MIN_SYMS;

		if (gnuhash && !(flags & ELFSYM_SCAN) && (large || (flags & ELFSYM_HASH)) &&
		    elf_ndxscn(dynsym) == gnuhash_sh.sh_link && hashed_open(elf, fd, &gnuhash_sh, &h) == 0)
			hashed = hash_all(elf, &h, w) == 0;
		if (!hashed && elfread__symtab(elf, dynsym, fd))
			scan(elf, dynsym, &dynsym_sh, w);
	}
	elf_end(elf);
	ret = w->found;
out:
	free(w);
	return ret;
}

int elfsym__lookup_fd(int fd, struct elfsym_want *want, int n)
{
	return elfsym__lookup_fd_flags(fd, want, n, 0);
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
