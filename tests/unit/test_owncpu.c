// SPDX-License-Identifier: MIT
#include <math.h>

#include "owncpu.h"
#include "test.h"

#define NEAR(a, b, eps) (fabs((a) - (b)) <= (eps))

/* CPUs 0..N-1 looked at */
static struct owncpu cpus(int n)
{
	struct owncpu o = {.ncpus = n};

	for (int i = 0; i < n; i++)
		o.mask[i / 8] |= (unsigned char)(1u << (i % 8));
	return o;
}

static struct owncpu_snap snap(double t, double self, double busy, double idle)
{
	return (struct owncpu_snap){.t = t, .self = self, .busy = busy, .idle = idle};
}

/* /proc/stat's CPU lines over the CPUs looked at: user nice system irq softirq are busy,
 * idle and iowait idle, steal neither; the "cpu " sum line and other CPUs are left out,
 * and the interrupt lines after the CPU lines are not read. */
TEST(parse_proc_stat)
{
	static const char text[] = "cpu  900 0 900 900 900 0 0 0 0 0\n"
				   "cpu0 100 2 30 400 5 1 2 50 0 0\n"
				   "cpu1 10 0 20 300 0 0 0 7 0 0\n"
				   "cpu2 1000 0 0 0 0 0 0 0 0 0\n"
				   "intr 12345 1 2 3\n"
				   "cpu3 1000 0 0 0 0 0 0 0 0 0\n";
	struct owncpu o = cpus(2);
	struct owncpu_snap s;

	CHECK_INT(owncpu__parse(&o, text, 0.01, &s), 0);
	CHECK(NEAR(s.busy, (100 + 2 + 30 + 1 + 2 + 10 + 20) * 0.01, 1e-9));
	CHECK(NEAR(s.idle, (400 + 5 + 300) * 0.01, 1e-9));
	o = cpus(3);
	CHECK_INT(owncpu__parse(&o, text, 0.01, &s), 0);
	CHECK(NEAR(s.busy, (165 + 1000) * 0.01, 1e-9));
}

/* Text without a CPU line of ours, truncated or malformed lines: an error or the lines
 * that parse, never a read past the text. */
TEST(parse_bad_text)
{
	struct owncpu o = cpus(1);
	struct owncpu_snap s;

	CHECK(owncpu__parse(&o, "", 0.01, &s) < 0);
	CHECK(owncpu__parse(&o, "cpu  1 2 3 4 5 6 7\n", 0.01, &s) < 0);
	CHECK(owncpu__parse(&o, "cpu1 1 2 3 4 5 6 7\n", 0.01, &s) < 0);
	CHECK(owncpu__parse(&o, "cpu0 1 2 3", 0.01, &s) < 0);
	CHECK(owncpu__parse(&o, "cpu99999999999999999999 1 2 3 4 5 6 7\n", 0.01, &s) < 0);
	CHECK(owncpu__parse(&o, "cpu-1 1 2 3 4 5 6 7\ncpu0", 0.01, &s) < 0);
	CHECK_INT(owncpu__parse(&o, "cpu0 1 0 0 4 0 0 0", 1, &s), 0);
	CHECK(NEAR(s.busy, 1, 1e-9) && NEAR(s.idle, 4, 1e-9));
}

/* A CPU free: gpubpf's time comes out of idle time and takes nothing. */
TEST(idle_cpu_takes_nothing)
{
	struct owncpu o = cpus(2);
	struct owncpu_snap a = snap(10, 1, 5, 5), b;
	double hi;

	owncpu__add(&o, &a);
	/* 1 s: the job's one thread ran 1 s, gpubpf 0.2 s; 0.8 s idle */
	b = snap(11, 1.2, 6.2, 5.8);
	owncpu__add(&o, &b);
	CHECK(NEAR(o.own, 0.2, 1e-9));
	CHECK(NEAR(o.displaced, 0, 1e-9));
	CHECK(NEAR(owncpu__share(&o, 1, &hi), 0, 1e-9) && NEAR(hi, 0, 1e-9));
}

/* Both CPUs full (two job threads): all of gpubpf's 0.2 s was displaced; a thread's fair
 * share, the estimate, is 0.2 * 1 / 1.8, all of it the range's top. Then a second with
 * 0.1 s of idle: only 0.1 s of gpubpf's next 0.2 s was displaced. */
TEST(full_machine)
{
	struct owncpu o = cpus(2);
	struct owncpu_snap a = snap(0, 0, 0, 0), b = snap(1, 0.2, 2, 0), c = snap(2, 0.4, 3.9, 0.1);
	double hi, mid;

	owncpu__add(&o, &a);
	owncpu__add(&o, &b);
	CHECK(NEAR(o.displaced, 0.2, 1e-9));
	CHECK(NEAR(o.fair, 0.2 / 1.8, 1e-9));
	owncpu__add(&o, &c);
	CHECK(NEAR(o.own, 0.4, 1e-9));
	CHECK(NEAR(o.displaced, 0.3, 1e-9));
	CHECK(NEAR(o.fair, 0.2 / 1.8 + 0.1 * 1 / 1.7, 1e-9));
	CHECK(NEAR(o.span, 2, 1e-9));
	mid = owncpu__share(&o, 2, &hi);
	CHECK(NEAR(hi, 0.15, 1e-9));
	CHECK(NEAR(mid, o.fair / 2, 1e-9) && mid < hi);
}

/* One CPU: the job's thread ran what gpubpf left (0.7 s): its fair share is all 0.3 s. */
TEST(one_cpu)
{
	struct owncpu o = cpus(1);
	struct owncpu_snap a = snap(0, 0, 0, 0), b = snap(1, 0.3, 1, 0);

	owncpu__add(&o, &a);
	owncpu__add(&o, &b);
	CHECK(NEAR(o.displaced, 0.3, 1e-9));
	CHECK(NEAR(o.fair, 0.3, 1e-9));
}

/* Clocks that go backwards (a counter reset, a late look) add nothing negative; a look
 * at the same instant adds nothing; shares stay within [0, 1]. */
TEST(odd_looks)
{
	struct owncpu o = cpus(2);
	struct owncpu_snap a = snap(5, 1, 10, 10), b = snap(5, 2, 20, 0), c = snap(6, 0.5, 9, 9);
	double hi;

	owncpu__add(&o, &a);
	owncpu__add(&o, &b);
	CHECK(NEAR(o.own, 0, 1e-12) && NEAR(o.span, 0, 1e-12));
	owncpu__add(&o, &c);
	CHECK(o.own >= 0 && o.displaced >= 0 && o.fair >= 0);
	CHECK(owncpu__share(&o, 0, &hi) == 0 && hi == 0);
	o.fair = o.displaced = 50;
	CHECK(owncpu__share(&o, 1, &hi) == 1 && hi == 1);
}

/* The set-up's part: counted with the recording's where the targets ran beside it (-p),
 * said and not counted where they were held (a started command); idle CPUs hold it. */
TEST(setup_beside_the_targets)
{
	struct owncpu_snap mark = snap(0, 0.01, 100, 50), first = snap(0.5, 0.31, 101, 50.1);
	struct owncpu o = cpus(2);
	char text[1024];

	o.last = first;
	o.have = true;
	o.setup = 0.31;
	owncpu__add_setup(&o, &mark, true);
	/* 0.3 s of gpubpf's, 0.1 s idle: 0.2 displaced; the others ran 0.7 s, a thread 0.5 */
	CHECK(NEAR(o.setup_displaced, 0.2, 1e-9));
	CHECK(NEAR(o.displaced, 0.2, 1e-9) && NEAR(o.fair, 0.2 * 0.5 / 0.7, 1e-9));
	owncpu__add(&o, &(struct owncpu_snap){1.5, 0.31, 103, 50.1}); /* a recording second, none of gpubpf's */
	CHECK(NEAR(o.displaced, 0.2, 1e-9) && NEAR(o.own, 0, 1e-12));
	owncpu__text(&o, 1, text, sizeof(text));
	CHECK(strstr(text, "0.31 s more setting up before it, beside the running targets, 0.2 s of that where no CPU"));

	o = cpus(2);
	o.last = first;
	o.have = true;
	owncpu__add_setup(&o, &mark, false); /* held: said, not counted */
	CHECK(NEAR(o.setup_displaced, 0.2, 1e-9) && o.displaced == 0 && o.fair == 0);
	owncpu__text(&o, 1, text, sizeof(text));
	CHECK(strstr(text, "the targets held or not started"));

	o = cpus(2);
	o.last = snap(0.5, 0.31, 100.3, 50.5); /* a CPU idle all along */
	o.have = true;
	owncpu__add_setup(&o, &mark, true);
	CHECK(o.setup_displaced == 0 && o.fair == 0);
	o.last = mark; /* no time between: nothing */
	owncpu__add_setup(&o, &mark, true);
	CHECK(o.setup_displaced == 0);
}

/* What followed the recording (symbolizing the profile): counted with the rest where the
 * targets ran on, said and not counted where they were gone; looked at once. */
TEST(after_the_recording)
{
	struct owncpu_snap last = snap(3, 1.0, 200, 10), later = snap(3.1, 1.06, 200.2, 10.01),
			   more = snap(3.2, 1.2, 200.4, 10.01);
	struct owncpu o = cpus(2);
	char text[1024];

	o.last = last;
	o.have = true;
	o.own = 0.07;
	o.span = 2.5;
	owncpu__add_after(&o, &later, true);
	/* 0.06 s of gpubpf's, 0.01 s idle: 0.05 displaced; the others ran 0.14 s, a thread 0.1 */
	CHECK(o.have_after && NEAR(o.after, 0.06, 1e-9) && NEAR(o.after_displaced, 0.05, 1e-9));
	CHECK(NEAR(o.displaced, 0.05, 1e-9) && NEAR(o.fair, 0.05 * 0.1 / 0.14, 1e-9));
	CHECK(NEAR(o.own, 0.07, 1e-12) && NEAR(o.span, 2.5, 1e-12)); /* the recording's own: as they were */
	owncpu__text(&o, 2.5, text, sizeof(text));
	CHECK(strstr(text, "0.06 s more after it, symbolizing the profile, beside the targets running on, 0.05 s of "
			   "that where no CPU was idle, counted with the rest"));
	CHECK(strstr(text, "of it and after it ran where none"));
	owncpu__add_after(&o, &more, true); /* once only */
	CHECK(NEAR(o.after, 0.06, 1e-9) && NEAR(o.displaced, 0.05, 1e-9));

	o = cpus(2);
	o.last = last;
	o.have = true;
	owncpu__add_after(&o, &later, false); /* the targets gone: said, not counted */
	CHECK(o.have_after && NEAR(o.after_displaced, 0.05, 1e-9) && o.displaced == 0 && o.fair == 0);
	owncpu__text(&o, 2.5, text, sizeof(text));
	CHECK(strstr(text, "0.06 s more after it, symbolizing the profile, the targets gone"));

	o = cpus(2);
	owncpu__add_after(&o, &later, true); /* no look before: nothing to measure against */
	CHECK(!o.have_after && o.displaced == 0);
}

/* The real thing: two looks at this machine a moment apart read sane numbers. */
TEST(live_looks)
{
	struct owncpu o;
	volatile double x = 0;
	char text[512];

	owncpu__mark();
	owncpu__start(&o, true);
	if (o.failed)
		SKIP("/proc/stat unreadable here");
	for (long i = 0; i < 20000000; i++)
		x += (double)i;
	owncpu__look(&o);
	CHECK(o.have && !o.failed);
	CHECK(o.span > 0);
	CHECK(o.own > 0 && o.own <= o.span * 1.5 + 0.02);
	/* the set-up's displaced part (mark to start) counts with the looks' where the targets
	 * ran beside it, its CPU apart from theirs: on a machine with no CPU idle (a loaded CI
	 * host) all of both is displaced */
	CHECK(o.displaced <= o.own + o.setup_displaced + 1e-9);
	owncpu__text(&o, o.span, text, sizeof(text));
	CHECK(strstr(text, "gpubpf's own CPU: ") == text);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(parse_proc_stat);
	RUN(parse_bad_text);
	RUN(idle_cpu_takes_nothing);
	RUN(full_machine);
	RUN(one_cpu);
	RUN(odd_looks);
	RUN(setup_beside_the_targets);
	RUN(after_the_recording);
	RUN(live_looks);
	return T_END();
}
