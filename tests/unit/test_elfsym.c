// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elfsym.h"
#include "test.h"

__attribute__((noinline)) int elfsym_probe_target(int x)
{
	return x * 3 + 1;
}

/* Our own function: its file offset, mapped back through /proc/self/maps, is its address. */
TEST(own_function)
{
	struct elfsym_want w[] = {{.name = "elfsym_probe_target"}, {.name = "no_such_symbol_here"}};
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	uint64_t start, end, off, want_off = 0;
	char line[512], perms[8];
	FILE *maps;

	CHECK(fd >= 0);
	CHECK_INT(elfsym__lookup_fd(fd, w, 2), 1);
	close(fd);
	CHECK(w[0].offset != 0);
	CHECK_INT(w[1].offset, 0);
	/* The mapping that holds the function gives the expected offset. */
	maps = fopen("/proc/self/maps", "r");
	CHECK(maps != NULL);
	uintptr_t a = (uintptr_t)&elfsym_probe_target;
	while (fgets(line, sizeof(line), maps)) {
		if (sscanf(line, "%lx-%lx %7s %lx", &start, &end, perms, &off) == 4 && a >= start && a < end) {
			want_off = a - start + off;
			break;
		}
	}
	fclose(maps);
	CHECK_INT(w[0].offset, want_off);
}

TEST(not_elf)
{
	struct elfsym_want w[] = {{.name = "x"}};
	int fd = open("/etc/hostname", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		SKIP("/etc/hostname missing");
	CHECK_INT(elfsym__lookup_fd(fd, w, 1), -ENOEXEC);
	close(fd);
}

TEST(libcudart)
{
	const char *home = getenv("CUDA_HOME");
	char path[512];
	struct elfsym_want w[] = {{.name = "cudaLaunchKernel"},
				  {.name = "cudaMemcpy"},
				  {.name = "cudaMalloc"},
				  {.name = "cudaLaunchKernel_ptsz"}};
	int fd;

	snprintf(path, sizeof(path), "%s/lib64/libcudart.so.13", home && *home ? home : "/usr/local/cuda");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		SKIP("%s is missing (no CUDA here)", path);
	CHECK_INT(elfsym__lookup_fd(fd, w, 4), 4);
	close(fd);
	for (int i = 0; i < 4; i++)
		CHECK(w[i].offset != 0);
}

static const char *cudart_path(char *buf, size_t len)
{
	const char *home = getenv("CUDA_HOME");

	snprintf(buf, len, "%s/lib64/libcudart.so.13", home && *home ? home : "/usr/local/cuda");
	return buf;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names .dynsym of the object at FD carries (defined or not), up to MAX, sorted. */
static int dynsym_names(int fd, char **names, int max)
{
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	Elf_Scn *scn = NULL;
	int n = 0, k = 0;

	while (elf && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 1; i < sh.sh_size / sh.sh_entsize && n < max; i++) {
			GElf_Sym sym;
			const char *name;

			if (gelf_getsym(d, (int)i, &sym) && (name = elf_strptr(elf, sh.sh_link, sym.st_name)) && *name)
				names[n++] = strdup(name);
		}
	}
	elf_end(elf);
	/* A versioned name's other versions: one want a name, as the callers ask. */
	qsort(names, (size_t)n, sizeof(*names), cmp_names);
	for (int i = 0; i < n; i++) {
		if (k && !strcmp(names[k - 1], names[i]))
			free(names[i]);
		else
			names[k++] = names[i];
	}
	return k;
}

/* The .gnu.hash lookups find exactly what a pass over .dynsym finds, for every name the
 * table has (defined functions, data, undefined imports, versioned duplicates) and names
 * it has not: real, stripped libraries of this machine. */
static int compare_paths(const char *path, int *names_out)
{
	enum { BATCH = 200, MAX = 20000 };
	char **names = calloc(MAX, sizeof(*names));
	struct elfsym_want a[BATCH + 1], b[BATCH + 1];
	int fd = open(path, O_RDONLY | O_CLOEXEC), n, bad = 0, found = 0;

	if (fd < 0 || !names) {
		free(names);
		return -1;
	}
	elf_version(EV_CURRENT);
	n = dynsym_names(fd, names, MAX);
	*names_out = n;
	for (int at = 0; at < n; at += BATCH) {
		int k = n - at < BATCH ? n - at : BATCH, fa, fb;

		for (int i = 0; i < k; i++)
			a[i] = b[i] = (struct elfsym_want){.name = names[at + i]};
		a[k] = b[k] = (struct elfsym_want){.name = "gpubpf_no_such_name"};
		fa = elfsym__lookup_fd_flags(fd, a, k + 1, ELFSYM_HASH);
		fb = elfsym__lookup_fd_flags(fd, b, k + 1, ELFSYM_SCAN);
		bad += fa != fb;
		found += fa;
		for (int i = 0; i <= k; i++)
			bad += a[i].offset != b[i].offset || a[i].addr != b[i].addr;
	}
	for (int i = 0; i < n; i++)
		free(names[i]);
	free(names);
	close(fd);
	return bad ? -bad : found;
}

TEST(hash_matches_scan)
{
	char cudart[512];
	const char *libs[] = {cudart_path(cudart, sizeof(cudart)), "/lib/x86_64-linux-gnu/libc.so.6",
			      "/lib/x86_64-linux-gnu/libstdc++.so.6", "/lib64/ld-linux-x86-64.so.2"};
	int checked = 0;

	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
		int names = 0, r;

		if (access(libs[i], R_OK))
			continue;
		r = compare_paths(libs[i], &names);
		if (r < 0)
			fprintf(stderr, "  %s: %d differences among %d names\n", libs[i], -r, names);
		CHECK(r > 0);
		CHECK(names > 20);
		checked++;
	}
	if (!checked)
		SKIP("none of the libraries is here");
}

/* Copy libcudart to a file of ours and break its .gnu.hash at byte AT of the section (4
 * bytes of VALUE; AT < 0: every name is let through to one chain without an end, which
 * runs on to the table's): the lookups fall back to the scan and find the same. */
static void broken_hash_case(const char *t_case_name, const char *src, long at, uint32_t value)
{
	char tmp[] = "/tmp/gpubpf-elfsym-XXXXXX";
	/* a name it lacks first: its lookup is the one that meets the breakage */
	struct elfsym_want w[] = {{.name = "cudaNoSuchFunction"},
				  {.name = "cudaLaunchKernel"},
				  {.name = "cudaMemcpy"},
				  {.name = "cudaMalloc"}};
	int in = open(src, O_RDONLY | O_CLOEXEC), out = mkstemp(tmp);
	char buf[1 << 16];
	ssize_t got;
	Elf *elf;
	Elf_Scn *scn = NULL;
	uint64_t hash_off = 0, hash_size = 0;

	CHECK(in >= 0 && out >= 0);
	unlink(tmp);
	while ((got = read(in, buf, sizeof(buf))) > 0)
		CHECK(write(out, buf, (size_t)got) == got);
	elf = elf_begin(in, ELF_C_READ, NULL);
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;

		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_GNU_HASH) {
			hash_off = sh.sh_offset;
			hash_size = sh.sh_size;
		}
	}
	elf_end(elf);
	CHECK(hash_off != 0);
	if (at >= 0) {
		CHECK(pwrite(out, &value, 4, (off_t)(hash_off + (uint64_t)at)) == 4);
	} else {
		uint32_t hdr[4], chain;
		uint64_t chains;

		CHECK(pread(out, hdr, sizeof(hdr), (off_t)hash_off) == sizeof(hdr));
		/* a bloom filter that lets every name through, to its chain */
		for (uint64_t o = 16; o < 16 + (uint64_t)hdr[2] * 8; o += 4)
			CHECK(pwrite(out, &(uint32_t){~0u}, 4, (off_t)(hash_off + o)) == 4);
		/* every bucket starts at the first hashed symbol: a lookup walks every chain */
		for (uint64_t o = 16 + (uint64_t)hdr[2] * 8; o < 16 + (uint64_t)hdr[2] * 8 + (uint64_t)hdr[0] * 4;
		     o += 4)
			CHECK(pwrite(out, &hdr[1], 4, (off_t)(hash_off + o)) == 4);
		chains = 16 + (uint64_t)hdr[2] * 8 + (uint64_t)hdr[0] * 4;
		for (uint64_t o = chains; o + 4 <= hash_size; o += 4) {
			CHECK(pread(out, &chain, 4, (off_t)(hash_off + o)) == 4);
			chain &= ~1u;
			CHECK(pwrite(out, &chain, 4, (off_t)(hash_off + o)) == 4);
		}
	}
	CHECK_INT(elfsym__lookup_fd_flags(out, w, 4, ELFSYM_HASH), 3);
	CHECK_INT(w[0].offset, 0);
	for (int i = 1; i < 4; i++)
		CHECK(w[i].offset != 0);
	close(in);
	close(out);
}

TEST(broken_hash_falls_back)
{
	char path[512];

	cudart_path(path, sizeof(path));
	if (access(path, R_OK))
		SKIP("%s is missing (no CUDA here)", path);
	broken_hash_case(t_case_name, path, 0, 0); /* no buckets */
	if (t_case_failed)
		return;
	broken_hash_case(t_case_name, path, 0, 0x7fffffff); /* buckets past the section */
	if (t_case_failed)
		return;
	broken_hash_case(t_case_name, path, 4, 0x7fffffff); /* symbols hashed past .dynsym */
	if (t_case_failed)
		return;
	broken_hash_case(t_case_name, path, 8, 0x10000000); /* a bloom filter past the section */
	if (t_case_failed)
		return;
	broken_hash_case(t_case_name, path, -1, 0); /* chains without an end */
	if (t_case_failed)
		return;
}

/* ELFSYM_CUDART reads .symtab only where static cudart may hide: built here, a hidden
 * cudaLaunchKernel in .symtab alone, in an executable and in libraries with and without
 * device code (a .nv_fatbin section), with and without a dependency on a libcudart.so.13
 * (a stand-in built here too). Without the flag, every one of them is found. */
static int cudart_case(const char *dir, const char *obj)
{
	struct elfsym_want w[] = {{.name = "cudaLaunchKernel"}, {.name = "cudaMalloc"}};
	char path[512];
	int fd, n;

	snprintf(path, sizeof(path), "%s/%s", dir, obj);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = elfsym__lookup_fd(fd, w, 2) == 1 ? 1 : -100;
	n = n == 1 ? elfsym__lookup_fd_flags(fd, w, 2, ELFSYM_CUDART) : n;
	close(fd);
	return n;
}

/* A copy of DIR/OBJ with its .shstrtab (or, STRTAB, its .symtab's string table) flagged
 * SHF_COMPRESSED behind a header claiming an absurd size: what ELFSYM_CUDART's lookup finds. */
static int compressed_case(const char *dir, const char *obj, bool strtab)
{
	struct elfsym_want w[] = {{.name = "cudaLaunchKernel"}};
	Elf64_Chdr ch = {.ch_type = 2 /* ELFCOMPRESS_ZSTD */, .ch_size = 0x3600000000000002ull, .ch_addralign = 1};
	char from[512], path[512], cmd[1200];
	Elf64_Ehdr eh;
	Elf64_Shdr sh;
	uint32_t target;
	int fd, n = -1;

	snprintf(from, sizeof(from), "%s/%s", dir, obj);
	snprintf(path, sizeof(path), "%s/compressed-%d.so", dir, strtab);
	snprintf(cmd, sizeof(cmd), "cp %s %s", from, path);
	if (system(cmd) || (fd = open(path, O_RDWR | O_CLOEXEC)) < 0)
		return -1;
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh))
		goto out;
	target = eh.e_shstrndx;
	for (unsigned i = 0; strtab && i < eh.e_shnum; i++)
		if (pread(fd, &sh, sizeof(sh), (off_t)(eh.e_shoff + i * sizeof(sh))) == sizeof(sh) &&
		    sh.sh_type == SHT_SYMTAB)
			target = sh.sh_link;
	if (pread(fd, &sh, sizeof(sh), (off_t)(eh.e_shoff + target * sizeof(sh))) != sizeof(sh))
		goto out;
	sh.sh_flags |= SHF_COMPRESSED;
	if (pwrite(fd, &sh, sizeof(sh), (off_t)(eh.e_shoff + target * sizeof(sh))) != sizeof(sh) ||
	    pwrite(fd, &ch, sizeof(ch), (off_t)sh.sh_offset) != sizeof(ch))
		goto out;
	n = elfsym__lookup_fd_flags(fd, w, 1, ELFSYM_CUDART);
out:
	close(fd);
	return n;
}

TEST(symtab_where_cudart_hides)
{
	char dir[] = "/tmp/gpubpf-elfsym-XXXXXX", cmd[2048];
	FILE *f;

	if (system("command -v gcc >/dev/null 2>&1"))
		SKIP("gcc missing");
	CHECK(mkdtemp(dir) != NULL);
	snprintf(cmd, sizeof(cmd), "%s/obj.c", dir);
	f = fopen(cmd, "w");
	CHECK(f != NULL);
	fputs("__attribute__((visibility(\"hidden\"), noinline)) int cudaLaunchKernel(int x) { return x + 1; }\n"
	      "#ifdef FATBIN\n__attribute__((section(\".nv_fatbin\"), used)) const char fatbin[16] = {1};\n#endif\n"
	      "#ifdef MAIN\nint main(int c, char **v) { (void)v; return cudaLaunchKernel(c); }\n#endif\n"
	      "int obj_entry(int x) { return cudaLaunchKernel(x); }\n",
	      f);
	CHECK(fclose(f) == 0);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && echo 'int cudart_stub;' > stub.c && "
		 "gcc -shared -fPIC stub.c -Wl,-soname,libcudart.so.13 -o libcudart.so.13 && "
		 "gcc -shared -fPIC obj.c -o plain.so && "
		 "gcc -shared -fPIC -DFATBIN obj.c -o fatbin.so && "
		 "gcc -shared -fPIC -DFATBIN obj.c -Wl,--no-as-needed ./libcudart.so.13 -o fatbin_dyn.so && "
		 "gcc -DMAIN obj.c -o exe && "
		 "gcc -DMAIN obj.c -Wl,--no-as-needed ./libcudart.so.13 -o exe_dyn",
		 dir);
	CHECK_INT(system(cmd), 0);
	CHECK_INT(cudart_case(dir, "exe"), 1);		 /* nvcc's default: static cudart */
	CHECK_INT(cudart_case(dir, "fatbin.so"), 1);	 /* nvcc -shared, cudart hidden in it */
	CHECK_INT(cudart_case(dir, "plain.so"), 0);	 /* no device code: no static cudart */
	CHECK_INT(cudart_case(dir, "fatbin_dyn.so"), 0); /* calls the shared libcudart */
	CHECK_INT(cudart_case(dir, "exe_dyn"), 0);
	/* fatbin.so with its section names, then its .symtab's names, flagged compressed and
	 * claiming 0x3600000000000002 bytes (what fuzz_elfsym found libelf asked to allocate):
	 * neither is read, nothing allocated (ASan aborts on it) */
	CHECK_INT(compressed_case(dir, "fatbin.so", false), 0);
	CHECK_INT(compressed_case(dir, "fatbin.so", true), 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK_INT(system(cmd), 0);
}

/* A real one: NCCL (which PyTorch loads) links cudart statically, its entry points local
 * to its .symtab beside its kernels' .nv_fatbin. */
TEST(nccl_static_cudart)
{
	const char *home = getenv("CUDA_HOME");
	struct elfsym_want w[] = {{.name = "cudaLaunchKernel"}, {.name = "cudaMemcpyAsync"}, {.name = "cudaMalloc"}};
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/lib64/libnccl.so.2", home && *home ? home : "/usr/local/cuda");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		SKIP("%s is missing (no NCCL here)", path);
	CHECK_INT(elfsym__lookup_fd_flags(fd, w, 3, ELFSYM_CUDART), 3);
	close(fd);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(own_function);
	RUN(not_elf);
	RUN(libcudart);
	RUN(hash_matches_scan);
	RUN(broken_hash_falls_back);
	RUN(symtab_where_cudart_hides);
	RUN(nccl_static_cudart);
	return T_END();
}
