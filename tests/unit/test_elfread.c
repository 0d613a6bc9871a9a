// SPDX-License-Identifier: MIT
/* A target's ELF file claiming more than it holds: a copy of this test's own binary with
 * one section (the section names, the symbol table, its names, a DWARF section, a note, the
 * debug link) moved 256 MiB into a sparse file and claiming 512 MiB (under every size cap:
 * only the hole refuses it), which costs its maker
 * 16 KiB of disk. libelf and libdw read such sections whole: before elfread.c, gpubpf
 * grew by what each claimed (3 GiB resident for one file). Now the section is refused,
 * the rest of the file is read, and gpubpf stays small, whether the file is looked up
 * (elfsym), tracked in a process that maps it, or symbolized (syms, DWARF included). */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "elfread.h"
#include "elfsym.h"
#include "syms.h"
#include "test.h"

#define FAR (256ull << 20)
#define CLAIM (512ull << 20)

/* The index of section NAME (or of the first of TYPE where NAME is NULL, or its sh_link
 * with LINK) of the ELF image in BUF, or -1. */
static int find(const unsigned char *buf, size_t len, const char *name, unsigned type, bool link)
{
	const Elf64_Ehdr *eh = (const void *)buf;
	const Elf64_Shdr *sh = (const void *)(buf + eh->e_shoff), *names = &sh[eh->e_shstrndx];

	if (eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(*sh) > len)
		return -1;
	for (int i = 0; i < eh->e_shnum; i++) {
		if (name ? !strcmp((const char *)buf + names->sh_offset + sh[i].sh_name, name) : sh[i].sh_type == type)
			return link ? (int)sh[i].sh_link : i;
	}
	return -1;
}

/* A sparse copy of this binary at PATH with section IDX far out and claiming CLAIM bytes. */
static int sparse_copy(const char *path, const unsigned char *buf, size_t len, int idx)
{
	const Elf64_Ehdr *eh = (const void *)buf;
	Elf64_Shdr sh;
	off_t at = (off_t)(eh->e_shoff + (uint64_t)idx * sizeof(sh));
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0)
		return -errno;
	memcpy(&sh, buf + at, sizeof(sh));
	sh.sh_offset = FAR;
	sh.sh_size = CLAIM;
	sh.sh_flags &= ~(uint64_t)SHF_COMPRESSED;
	if (write(fd, buf, len) != (ssize_t)len || pwrite(fd, &sh, sizeof(sh), at) != (ssize_t)sizeof(sh) ||
	    ftruncate(fd, (off_t)(FAR + CLAIM))) {
		close(fd);
		return -EIO;
	}
	return fd;
}

/* Section IDX of this binary made sparse at PATH: refused, the rest read; 0 or what failed. */
static int one_case(const char *path, const unsigned char *buf, size_t len, int idx)
{
	struct elfsym_want w[] = {{.name = "main"}};
	struct sym_result res;
	struct syms *s;
	void *map;
	Elf *elf;
	int fd = sparse_copy(path, buf, len, idx);

	if (fd < 0)
		return 1;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elfread__whole(elf_getscn(elf, (size_t)idx), fd, ELFREAD_DWARF_MAX))
		return 2;
	if (!elfread__whole(elf_getscn(elf, (size_t)find(buf, len, ".text", 0, false)), fd, ELFREAD_DWARF_MAX))
		return 3;
	elf_end(elf);
	/* looked up, tracked while this process maps it, and an address in it symbolized */
	if (elfsym__lookup_fd(fd, w, 1) < 0)
		return 4;
	map = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	s = syms__new();
	if (map == MAP_FAILED || !s || syms__track_pid(s, getpid()))
		return 5;
	syms__resolve_user(s, getpid(), (uint64_t)(uintptr_t)map + 64, &res);
	syms__free(s);
	return 0;
}

TEST(sparse_sections_refused)
{
	static const struct {
		const char *what, *name;
		unsigned type;
		bool link;
	} cases[] = {
	    {"section names", ".shstrtab", 0, false}, {"symbol table", NULL, SHT_SYMTAB, false},
	    {"symbol names", NULL, SHT_SYMTAB, true}, {"DWARF", ".debug_info", 0, false},
	    {"DWARF lines", ".debug_line", 0, false}, {"a note", ".note.gnu.build-id", 0, false},
	};
	char path[] = "/tmp/gpubpf-elfread-XXXXXX";
	unsigned char *buf;
	size_t len = 0, cap = 1 << 20;
	int self = open("/proc/self/exe", O_RDONLY | O_CLOEXEC), tmp = mkstemp(path);
	ssize_t r;

	CHECK(self >= 0 && tmp >= 0);
	close(tmp);
	buf = malloc(cap);
	while (buf && (r = read(self, buf + len, cap - len)) > 0)
		if ((len += (size_t)r) == cap)
			buf = realloc(buf, cap *= 2);
	close(self);
	CHECK(buf && len > sizeof(Elf64_Ehdr));
	elf_version(EV_CURRENT);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int idx = find(buf, len, cases[c].name, cases[c].type, cases[c].link), status = -1;
		struct rusage ru;
		pid_t pid;

		if (idx <= 0) {
			printf("# %s: no such section in this build, not checked\n", cases[c].what);
			continue;
		}
		/* each in a child of its own: its largest resident size is its own */
		fflush(stdout);
		pid = fork();
		CHECK(pid >= 0);
		if (pid == 0)
			_exit(one_case(path, buf, len, idx));
		CHECK(wait4(pid, &status, 0, &ru) == pid);
		printf("# %s: %ld MiB resident at most (exit %d)\n", cases[c].what, ru.ru_maxrss / 1024,
		       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		CHECK(ru.ru_maxrss / 1024 < 64);
	}
	unlink(path);
	free(buf);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(sparse_sections_refused);
	return T_END();
}
