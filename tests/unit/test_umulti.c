// SPDX-License-Identifier: MIT
/* Whether the kernel makes uprobe_multi links is asked of the kernel (umulti__probe), and
 * its no is heard: a program loaded for them is accepted where the kernel has them; one
 * loaded without their attach type is refused (EINVAL), as every program is on a kernel
 * before 6.6. Then real links, entry and return, on a function of this binary. Needs root. */
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "elfsym.h"
#include "test.h"
#include "umulti.h"

static int load(bool multi)
{
	/* r0 = 0; exit */
	const struct bpf_insn insns[] = {
	    {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
	    {.code = BPF_JMP | BPF_EXIT},
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts,
		    .expected_attach_type = multi ? (enum bpf_attach_type)UMULTI_ATTACH_TYPE : 0);

	return bpf_prog_load(BPF_PROG_TYPE_KPROBE, "umulti_test", "GPL", insns, 2, &opts);
}

__attribute__((noinline, used)) int gpubpf_umulti_test_target(int x)
{
	return x + 1;
}

TEST(probe_hears_the_kernel)
{
	int multi, plain, err;

	if (geteuid() != 0)
		SKIP("needs root to load BPF programs");
	multi = load(true);
	if (multi < 0)
		SKIP("this kernel does not load a program for uprobe_multi (%d): the fallback is all it has", multi);
	plain = load(false);
	CHECK(plain >= 0);
	err = umulti__probe(multi);
	if (err == -EINVAL)
		SKIP("this kernel has no uprobe_multi links (before 6.6)");
	CHECK_INT(err, 0);
	/* the kernel's no, as a kernel without them says it to every program */
	CHECK_INT(umulti__probe(plain), -EINVAL);
	close(multi);
	close(plain);
}

TEST(link_on_own_function)
{
	struct elfsym_want w = {.name = "gpubpf_umulti_test_target"};
	uint64_t cookie = 7;
	int prog, fd, link;

	if (geteuid() != 0)
		SKIP("needs root to load BPF programs");
	prog = load(true);
	if (prog < 0 || umulti__probe(prog))
		SKIP("no uprobe_multi links here");
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0 && elfsym__lookup_fd(fd, &w, 1) == 1);
	close(fd);
	link = umulti__attach(prog, "/proc/self/exe", &w.offset, &cookie, 1, false, getpid());
	CHECK(link >= 0);
	CHECK_INT(gpubpf_umulti_test_target(1), 2);
	/* a return probe as well, and a pid of -1 (every process) */
	close(link);
	link = umulti__attach(prog, "/proc/self/exe", &w.offset, &cookie, 1, true, -1);
	CHECK(link >= 0);
	close(link);
	close(prog);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(probe_hears_the_kernel);
	RUN(link_on_own_function);
	return T_END();
}
