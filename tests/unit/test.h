/* SPDX-License-Identifier: MIT */
/* Minimal unit-test harness. Each test binary prints one line per test case:
 *   PASS <binary>:<case>
 *   FAIL <binary>:<case>: <file>:<line>: <what>
 *   SKIP <binary>:<case>: <reason>
 * tests/run.sh counts these lines across every binary and script. */
#ifndef GPUBPF_TEST_H
#define GPUBPF_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_failed_total;
static int t_case_failed;
static int t_case_skipped;
static const char *t_prog = "test";

#define T_FAIL(...)                                                                                                    \
	do {                                                                                                           \
		printf("FAIL %s:%s: %s:%d: ", t_prog, t_case_name, __FILE__, __LINE__);                                \
		printf(__VA_ARGS__);                                                                                   \
		printf("\n");                                                                                          \
		t_case_failed = 1;                                                                                     \
		return;                                                                                                \
	} while (0)

#define CHECK(cond)                                                                                                    \
	do {                                                                                                           \
		if (!(cond))                                                                                           \
			T_FAIL("check failed: %s", #cond);                                                             \
	} while (0)

#define CHECK_INT(a, b)                                                                                                \
	do {                                                                                                           \
		long long _a = (long long)(a), _b = (long long)(b);                                                    \
		if (_a != _b)                                                                                          \
			T_FAIL("%s == %lld, expected %s == %lld", #a, _a, #b, _b);                                     \
	} while (0)

#define CHECK_STR(a, b)                                                                                                \
	do {                                                                                                           \
		const char *_a = (a), *_b = (b);                                                                       \
		if (!_a || !_b || strcmp(_a, _b) != 0)                                                                 \
			T_FAIL("%s == \"%s\", expected \"%s\"", #a, _a ? _a : "(null)", _b ? _b : "(null)");           \
	} while (0)

#define SKIP(...)                                                                                                      \
	do {                                                                                                           \
		printf("SKIP %s:%s: ", t_prog, t_case_name);                                                           \
		printf(__VA_ARGS__);                                                                                   \
		printf("\n");                                                                                          \
		t_case_skipped = 1;                                                                                    \
		return;                                                                                                \
	} while (0)

/* Define a case: TEST(name) { ... }  — every case has a local t_case_name. */
#define TEST(name)                                                                                                     \
	static void test_body_##name(const char *t_case_name);                                                         \
	static void test_##name(void)                                                                                  \
	{                                                                                                              \
		t_case_failed = 0;                                                                                     \
		t_case_skipped = 0;                                                                                    \
		test_body_##name(#name);                                                                               \
		if (t_case_failed)                                                                                     \
			t_failed_total++;                                                                              \
		else if (!t_case_skipped)                                                                              \
			printf("PASS %s:%s\n", t_prog, #name);                                                         \
		fflush(stdout);                                                                                        \
	}                                                                                                              \
	static void test_body_##name(const char *t_case_name __attribute__((unused)))

#define RUN(name) test_##name()

/* main: int main(int argc, char **argv) { T_BEGIN(argv); RUN(a); RUN(b); return T_END(); } */
#define T_BEGIN(argv)                                                                                                  \
	do {                                                                                                           \
		const char *_s = strrchr((argv)[0], '/');                                                              \
		t_prog = _s ? _s + 1 : (argv)[0];                                                                      \
		setvbuf(stdout, NULL, _IOLBF, 0);                                                                      \
	} while (0)
#define T_END() (t_failed_total ? 1 : 0)

#endif /* GPUBPF_TEST_H */
