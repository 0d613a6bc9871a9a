// SPDX-License-Identifier: MIT
/* The symbolizer's fixtures (test_syms.c, test_syms_perfmap.c): programs (PIE, non-PIE,
 * stripped + separate debug file, C++, shared library) compiled at run time into a temp
 * dir and run as children that print their own addresses, so every expected name and
 * line is known by construction. */
#ifndef GPUBPF_TEST_SYMS_FIXTURE_H
#define GPUBPF_TEST_SYMS_FIXTURE_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdint.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "syms.h"

/* ---- fixtures ------------------------------------------------------------------------ */

/* "//@NAME" marks a line the tests look up by name. */
static const char *fixture_c[] = {
    "#include <stdio.h>",
    "#include <stdlib.h>",
    "#include <sys/mman.h>",
    "#include <unistd.h>",
    "void *g_ret;",
    "const char fixture_blob[256] = \"blob\";",
    "extern char __ehdr_start;",
    "#ifdef WITH_LIB",
    "extern int lib_func(int);",
    "extern void *lib_ret;",
    "#endif",
    "__attribute__((noinline)) void fixture_probe(void) { g_ret = __builtin_return_address(0); } //@PROBE",
    "static inline __attribute__((always_inline)) int fixture_inl(int x) { //@INL_DECL",
    "	fixture_probe(); //@INL_CALL",
    "	return x + 5;",
    "}",
    "__attribute__((noinline)) int fixture_outer(int x) { //@OUTER_DECL",
    "	int r = fixture_inl(x); //@OUTER_CALL",
    "	return r;",
    "}",
    "__attribute__((noinline)) int fixture_leaf(int x) { //@LEAF",
    "	return x * 3 + 1;",
    "}",
    "int main(void)",
    "{",
    "	void *anon = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);",
    "	void *lf = 0, *lr = 0;",
    "	char c;",
    "	fixture_outer(1);",
    "#ifdef WITH_LIB",
    "	lib_func(2);",
    "	lf = (void *)lib_func;",
    "	lr = lib_ret;",
    "#endif",
    "	printf(\"leaf=%p ret=%p blob=%p base=%p anon=%p lib=%p libret=%p\\n\", (void *)fixture_leaf, g_ret,",
    "	       (void *)fixture_blob, (void *)&__ehdr_start, anon, lf, lr);",
    "	fflush(stdout);",
    "	if (read(0, &c, 1) < 0)",
    "		return 1;",
    "	return 0;",
    "}",
    NULL,
};

static const char *fixture_lib_c[] = {
    "void *lib_ret;",
    "__attribute__((noinline)) void lib_probe(void) { lib_ret = __builtin_return_address(0); }",
    "__attribute__((noinline)) int lib_func(int x) { //@LIB_FUNC",
    "	lib_probe(); //@LIB_CALL",
    "	return x + 1;",
    "}",
    NULL,
};

static const char *fixture_cc[] = {
    "#include <cstdio>",
    "#include <unistd.h>",
    "namespace ns {",
    "__attribute__((noinline)) int foo(int x) { return x + 1; } //@NS_FOO",
    "}",
    "template <typename T> __attribute__((noinline)) T bar(T x) { return x * 2; } //@BAR",
    "int main()",
    "{",
    "	char c;",
    "	ns::foo(1);",
    "	bar<float>(1.0f);",
    "	std::printf(\"foo=%p bar=%p\\n\", (void *)&ns::foo, (void *)&bar<float>);",
    "	std::fflush(stdout);",
    "	if (read(0, &c, 1) < 0)",
    "		return 1;",
    "	return 0;",
    "}",
    NULL,
};

static char fx_dir[256];
static uid_t child_uid;	    /* non-zero: children run as this user (and group nogroup) */
static const char *fx_skip; /* why fixtures are unavailable, or NULL */
static bool fx_built;
static bool have_cxx;

__attribute__((unused)) static int marker_line(const char **src, const char *marker)
{
	char m[64];

	snprintf(m, sizeof(m), "//@%s", marker);
	for (int i = 0; src[i]; i++) {
		const char *p = strstr(src[i], m);

		/* exact marker, not a prefix of a longer one */
		if (p && (p[strlen(m)] == '\0' || p[strlen(m)] == ' '))
			return i + 1;
	}
	return -1;
}

__attribute__((unused)) static int write_src(const char *path, const char **src)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -errno;
	for (int i = 0; src[i]; i++)
		fprintf(f, "%s\n", src[i]);
	return fclose(f) ? -errno : 0;
}

__attribute__((unused)) static bool have_tool(const char *tool)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", tool);
	return system(cmd) == 0;
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
__attribute__((unused)) static int sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

__attribute__((unused)) static void build_fixtures(void)
{
	const char *d = fx_dir;
	char bid[128] = "";
	FILE *f;

	if (fx_built)
		return;
	fx_built = true;
	if (!have_tool("gcc") || !have_tool("objcopy") || !have_tool("strip") || !have_tool("readelf")) {
		fx_skip = "gcc/objcopy/strip/readelf missing";
		return;
	}
	snprintf(fx_dir, sizeof(fx_dir), "/tmp/gpubpf-syms-XXXXXX");
	if (!mkdtemp(fx_dir)) {
		fx_skip = "mkdtemp failed";
		return;
	}
	{
		char p[512];

		snprintf(p, sizeof(p), "%s/fixture.c", d);
		write_src(p, fixture_c);
		snprintf(p, sizeof(p), "%s/fixture_lib.c", d);
		write_src(p, fixture_lib_c);
		snprintf(p, sizeof(p), "%s/fixture.cc", d);
		write_src(p, fixture_cc);
	}
#define FX_CFLAGS "-g -O0 -fno-omit-frame-pointer -Wl,--build-id"
	if (sh("cd %s && gcc " FX_CFLAGS " -fPIC -shared fixture_lib.c -o libfixture.so", d) ||
	    sh("cd %s && gcc " FX_CFLAGS " -fPIE -pie -DWITH_LIB fixture.c -L. -lfixture -Wl,-rpath,%s -o fixture_pie",
	       d, d) ||
	    sh("cd %s && gcc " FX_CFLAGS " -fno-pie -no-pie fixture.c -o fixture_nopie", d) ||
	    sh("cd %s && gcc " FX_CFLAGS " -fPIE -pie fixture.c -o fixture_stripped", d)) {
		fx_skip = "fixture build failed";
		return;
	}
	/* Separate debug file, found only through the build id in a private debug dir. */
	{
		char cmd[512];

		snprintf(cmd, sizeof(cmd),
			 "readelf -n %s/fixture_stripped | sed -n 's/.*Build ID: *\\([0-9a-f]*\\).*/\\1/p'", d);
		f = popen(cmd, "r");
		if (!f || !fgets(bid, sizeof(bid), f)) {
			if (f)
				pclose(f);
			fx_skip = "no build id in fixture";
			return;
		}
		pclose(f);
		bid[strcspn(bid, "\n")] = '\0';
	}
	if (strlen(bid) < 4 ||
	    sh("cd %s && mkdir -p debug/.build-id/%.2s && objcopy --only-keep-debug fixture_stripped "
	       "debug/.build-id/%.2s/%s.debug && strip --strip-all fixture_stripped",
	       d, bid, bid, bid + 2)) {
		fx_skip = "debug file split failed";
		return;
	}
	have_cxx = have_tool("g++") && !sh("cd %s && g++ " FX_CFLAGS " -fPIE -pie fixture.cc -o fixture_cxx", d);
}

__attribute__((unused)) static void remove_fixtures(void)
{
	if (fx_dir[0] && strncmp(fx_dir, "/tmp/gpubpf-syms-", 17) == 0 && !strchr(fx_dir, '\''))
		sh("rm -rf '%s'", fx_dir);
}

struct child {
	pid_t pid;
	int in_fd;
	char line[1024];
};

/* Start DIR/NAME with piped stdin/stdout and read the one line of addresses it prints. */
__attribute__((unused)) static int child_start(struct child *c, const char *name)
{
	int in[2], out[2];
	char path[512];
	struct pollfd pfd;
	size_t len = 0;

	memset(c, 0, sizeof(*c));
	snprintf(path, sizeof(path), "%s/%s", fx_dir, name);
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
		return -errno;
	fflush(stdout);
	c->pid = fork();
	if (c->pid < 0)
		return -errno;
	if (c->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		if (child_uid && (setgroups(0, NULL) || setgid(65534) || setuid(child_uid)))
			_exit(126);
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->in_fd = in[1];
	pfd.fd = out[0];
	pfd.events = POLLIN;
	while (len < sizeof(c->line) - 1 && !strchr(c->line, '\n')) {
		ssize_t r;

		if (poll(&pfd, 1, 10000) <= 0)
			break;
		r = read(out[0], c->line + len, sizeof(c->line) - 1 - len);
		if (r <= 0)
			break;
		len += (size_t)r;
		c->line[len] = '\0';
	}
	close(out[0]);
	return strchr(c->line, '\n') ? 0 : -EIO;
}

__attribute__((unused)) static void child_stop(struct child *c)
{
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
		c->pid = 0;
	}
	if (c->in_fd > 0) {
		close(c->in_fd);
		c->in_fd = 0;
	}
}

__attribute__((unused)) static uint64_t kv(const struct child *c, const char *key)
{
	char k[32];
	const char *p;

	snprintf(k, sizeof(k), "%s=", key);
	p = strstr(c->line, k);
	if (!p)
		return 0;
	p += strlen(k);
	if (!strncmp(p, "(nil)", 5))
		return 0;
	return strtoull(p, NULL, 16);
}

static const char *base_of(const char *p)
{
	const char *b = p ? strrchr(p, '/') : NULL;

	return b ? b + 1 : p;
}

/* Shared by the fixture tests: a child, its symbolizer, and a helper to resolve. */
#define FIXTURE_BEGIN(name)                                                                                            \
	struct child ch;                                                                                               \
	struct syms *s;                                                                                                \
	struct sym_result r;                                                                                           \
	build_fixtures();                                                                                              \
	if (fx_skip)                                                                                                   \
		SKIP("%s", fx_skip);                                                                                   \
	s = syms__new();                                                                                               \
	CHECK(s);                                                                                                      \
	if (child_start(&ch, name)) {                                                                                  \
		child_stop(&ch);                                                                                       \
		syms__free(s);                                                                                         \
		T_FAIL("child %s did not start", name);                                                                \
	}

/* Checks that must clean up before failing. */
#define CHECKC(cond)                                                                                                   \
	do {                                                                                                           \
		if (!(cond)) {                                                                                         \
			child_stop(&ch);                                                                               \
			syms__free(s);                                                                                 \
			T_FAIL("check failed: %s (%s)", #cond, ch.line);                                               \
		}                                                                                                      \
	} while (0)

#define CHECKC_STR(a, b)                                                                                               \
	do {                                                                                                           \
		const char *_a = (a), *_b = (b);                                                                       \
		if (!_a || !_b || strcmp(_a, _b)) {                                                                    \
			child_stop(&ch);                                                                               \
			syms__free(s);                                                                                 \
			T_FAIL("%s == \"%s\", expected \"%s\"", #a, _a ? _a : "(null)", _b ? _b : "(null)");           \
		}                                                                                                      \
	} while (0)

#define CHECKC_INT(a, b)                                                                                               \
	do {                                                                                                           \
		long long _a = (long long)(a), _b = (long long)(b);                                                    \
		if (_a != _b) {                                                                                        \
			child_stop(&ch);                                                                               \
			syms__free(s);                                                                                 \
			T_FAIL("%s == %lld, expected %s == %lld", #a, _a, #b, _b);                                     \
		}                                                                                                      \
	} while (0)

#endif
