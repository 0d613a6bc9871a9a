// SPDX-License-Identifier: MIT
/* Link sets torn down whole. USDT links of one BPF object share libbpf's USDT manager,
 * whose list of free spec ids each detach reallocs without a lock: destroyed from the
 * parallel threads of links__destroy_all they corrupted gpubpf's heap (CI: "realloc():
 * invalid next size" after a forked child's probes; ASan: a double free in
 * bpf_link__destroy). A serial set destroys them in order; under ASan (this file's san
 * build) a race would abort the test. Needs root. */
#include <errno.h>
#include <sys/sdt.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "../../bpf/cupti.h"
#include "../../bpf/procs.h"
#include "cupti.skel.h"
#include "links.h"
#include "test.h"

/* Probe sites in this binary, one spec each (different argument counts). */
__attribute__((noinline, used)) void gpubpf_links_test_sites(int a, long b)
{
	STAP_PROBE(gpubpf_links_test, p0);
	STAP_PROBE1(gpubpf_links_test, p1, a);
	STAP_PROBE2(gpubpf_links_test, p2, a, b);
	STAP_PROBE3(gpubpf_links_test, p3, a, b, a);
}

TEST(usdt_links_of_one_object_destroyed_whole)
{
	static const char *const names[] = {"p0", "p1", "p2", "p3"};
	struct cupti_bpf *skel;
	int rounds = 0;

	if (geteuid() != 0)
		SKIP("needs root to load BPF programs");
	skel = cupti_bpf__open_and_load();
	if (!skel)
		SKIP("cannot load the device-time BPF object here: %s", strerror(errno));
	for (int r = 0; r < 4; r++) {
		struct linkset s = {.serial = true};
		const char *failed = NULL;
		int err = 0;

		/* the same sites for this process and for every process: separate links, as a
		 * session's parent and forked child get */
		for (int pid = 0; pid < 2 && !failed; pid++) {
			for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !failed; i++) {
				struct bpf_link *l =
				    bpf_program__attach_usdt(skel->progs.dev_name, pid ? -1 : getpid(),
							     "/proc/self/exe", "gpubpf_links_test", names[i], NULL);

				if (!l) {
					err = errno;
					failed = names[i];
				} else if (linkset__add(&s, l)) {
					bpf_link__destroy(l);
					err = ENOMEM;
					failed = "linkset__add";
				}
			}
		}
		if (failed) {
			linkset__destroy(&s);
			cupti_bpf__destroy(skel);
			T_FAIL("attach %s: %s", failed, strerror(err));
		}
		gpubpf_links_test_sites(r, r);
		linkset__destroy(&s);
		CHECK_INT(s.n, 0);
		CHECK(s.v == NULL);
		rounds++;
	}
	cupti_bpf__destroy(skel);
	CHECK_INT(rounds, 4);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(usdt_links_of_one_object_destroyed_whole);
	return T_END();
}
