// SPDX-License-Identifier: MIT
/* Symbolizer tests. Fixtures (PIE, non-PIE, stripped + separate debug file, C++, shared
 * library) are compiled at run time into a temp dir and run as children that print
 * their own addresses, so every expected name and line is known by construction. */
#define _GNU_SOURCE
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

static int marker_line(const char **src, const char *marker)
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

static int write_src(const char *path, const char **src)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -errno;
	for (int i = 0; src[i]; i++)
		fprintf(f, "%s\n", src[i]);
	return fclose(f) ? -errno : 0;
}

static bool have_tool(const char *tool)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", tool);
	return system(cmd) == 0;
}

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

static void build_fixtures(void)
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

static void remove_fixtures(void)
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
static int child_start(struct child *c, const char *name)
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

static void child_stop(struct child *c)
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

static uint64_t kv(const struct child *c, const char *key)
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

/* ---- end-to-end fixtures ------------------------------------------------------------- */

TEST(pie_and_exit)
{
	uint64_t leaf, ret, blob, base;
	char want[128];
	int pid;

	FIXTURE_BEGIN("fixture_pie");
	pid = ch.pid;
	leaf = kv(&ch, "leaf");
	ret = kv(&ch, "ret");
	blob = kv(&ch, "blob");
	base = kv(&ch, "base");
	CHECKC(leaf && ret && blob && base);
	CHECKC_INT(syms__track_pid(s, pid), 0);
	CHECKC_INT(syms__track_pid(s, pid), 0); /* unchanged: cheap no-op */

	CHECKC_INT(syms__resolve_user(s, pid, leaf, &r), 0);
	CHECKC(r.resolved);
	CHECKC_INT(r.nframes, 1);
	CHECKC_STR(r.frames[0].func, "fixture_leaf");
	CHECKC_STR(r.frames[0].sys_name, "fixture_leaf");
	CHECKC_STR(base_of(r.frames[0].file), "fixture.c");
	CHECKC_INT(r.frames[0].line, marker_line(fixture_c, "LEAF"));
	CHECKC_INT(r.frames[0].start_line, marker_line(fixture_c, "LEAF"));
	CHECKC_STR(base_of(r.module), "fixture_pie");
	CHECKC(r.build_id && strlen(r.build_id) >= 16);
	CHECKC(r.map_start <= leaf && leaf < r.map_limit);
	CHECKC_INT(r.rel_addr, leaf - base);

	child_stop(&ch); /* exited: what was never looked up must still resolve */

	/* a return address: like a profiler, look up the call instruction (ret - 1) */
	CHECKC_INT(syms__resolve_user(s, pid, ret - 1, &r), 0);
	CHECKC(r.resolved);
	CHECKC_INT(r.nframes, 2);
	CHECKC_STR(r.frames[0].func, "fixture_inl");
	CHECKC_INT(r.frames[0].line, marker_line(fixture_c, "INL_CALL"));
	CHECKC_INT(r.frames[0].start_line, marker_line(fixture_c, "INL_DECL"));
	CHECKC_STR(base_of(r.frames[0].file), "fixture.c");
	CHECKC_STR(r.frames[1].func, "fixture_outer");
	CHECKC_INT(r.frames[1].line, marker_line(fixture_c, "OUTER_CALL"));
	CHECKC_INT(r.frames[1].start_line, marker_line(fixture_c, "OUTER_DECL"));
	CHECKC_STR(base_of(r.frames[1].file), "fixture.c");

	/* a data object: mapped, but no function there */
	CHECKC_INT(syms__resolve_user(s, pid, blob, &r), 0);
	CHECKC(!r.resolved);
	CHECKC_INT(r.nframes, 1);
	snprintf(want, sizeof(want), "fixture_pie+0x%" PRIx64, blob - base);
	CHECKC_STR(r.frames[0].func, want);
	CHECKC_STR(r.frames[0].sys_name, want);
	CHECKC_INT(r.rel_addr, blob - base);

	/* no mapping at all */
	CHECKC_INT(syms__resolve_user(s, pid, 0x10, &r), 0);
	CHECKC(!r.resolved);
	CHECKC_STR(r.module, "[unknown]");
	CHECKC_STR(r.frames[0].func, "[unknown]+0x10");

	/* the shared library, resolved after the exit too */
	CHECKC_INT(syms__resolve_user(s, pid, kv(&ch, "lib"), &r), 0);
	CHECKC(r.resolved);
	CHECKC_STR(r.frames[0].func, "lib_func");
	CHECKC_STR(base_of(r.module), "libfixture.so");
	CHECKC_STR(base_of(r.frames[0].file), "fixture_lib.c");
	CHECKC_INT(r.frames[0].line, marker_line(fixture_lib_c, "LIB_FUNC"));
	CHECKC_INT(syms__resolve_user(s, pid, kv(&ch, "libret") - 1, &r), 0);
	CHECKC(r.resolved);
	CHECKC_STR(r.frames[0].func, "lib_func");
	CHECKC_INT(r.frames[0].line, marker_line(fixture_lib_c, "LIB_CALL"));

	/* a new address in the dead process, in an object already parsed */
	CHECKC_INT(syms__resolve_user(s, pid, leaf + 1, &r), 0);
	CHECKC_STR(r.frames[0].func, "fixture_leaf");
	syms__free(s);
}

TEST(non_pie)
{
	uint64_t leaf, ret, blob, base;
	char want[128];

	FIXTURE_BEGIN("fixture_nopie");
	leaf = kv(&ch, "leaf");
	ret = kv(&ch, "ret");
	blob = kv(&ch, "blob");
	base = kv(&ch, "base");
	CHECKC(leaf && ret && blob && base);
	CHECKC_INT(syms__track_pid(s, ch.pid), 0);
	CHECKC_INT(syms__resolve_user(s, ch.pid, leaf, &r), 0);
	CHECKC(r.resolved);
	CHECKC_STR(r.frames[0].func, "fixture_leaf");
	CHECKC_INT(r.frames[0].line, marker_line(fixture_c, "LEAF"));
	CHECKC_INT(r.rel_addr, leaf); /* non-PIE: ELF addresses are absolute */
	CHECKC_INT(syms__resolve_user(s, ch.pid, ret - 1, &r), 0);
	CHECKC_INT(r.nframes, 2);
	CHECKC_STR(r.frames[0].func, "fixture_inl");
	CHECKC_INT(r.frames[0].line, marker_line(fixture_c, "INL_CALL"));
	CHECKC_STR(r.frames[1].func, "fixture_outer");
	CHECKC_INT(r.frames[1].line, marker_line(fixture_c, "OUTER_CALL"));
	CHECKC_INT(syms__resolve_user(s, ch.pid, blob, &r), 0);
	CHECKC(!r.resolved);
	snprintf(want, sizeof(want), "fixture_nopie+0x%" PRIx64, blob);
	CHECKC_STR(r.frames[0].func, want);
	child_stop(&ch);
	syms__free(s);
}

TEST(stripped_with_build_id_debug_file)
{
	char dbg[512];
	uint64_t leaf, ret;

	FIXTURE_BEGIN("fixture_stripped");
	snprintf(dbg, sizeof(dbg), "/nonexistent-dir:%s/debug", fx_dir);
	CHECKC_INT(syms__set_debug_dirs(s, dbg), 0);
	leaf = kv(&ch, "leaf");
	ret = kv(&ch, "ret");
	CHECKC_INT(syms__track_pid(s, ch.pid), 0);
	CHECKC_INT(syms__resolve_user(s, ch.pid, leaf, &r), 0);
	CHECKC(r.resolved);
	CHECKC_STR(r.frames[0].func, "fixture_leaf");
	CHECKC_STR(base_of(r.frames[0].file), "fixture.c");
	CHECKC_INT(r.frames[0].line, marker_line(fixture_c, "LEAF"));
	CHECKC_INT(syms__resolve_user(s, ch.pid, ret - 1, &r), 0);
	CHECKC_INT(r.nframes, 2);
	CHECKC_STR(r.frames[1].func, "fixture_outer");
	child_stop(&ch);
	syms__free(s);

	/* Without the debug dir the stripped binary has no names: module+offset. */
	s = syms__new();
	CHECK(s);
	CHECKC(!child_start(&ch, "fixture_stripped"));
	leaf = kv(&ch, "leaf");
	CHECKC_INT(syms__set_debug_dirs(s, "/nonexistent-dir"), 0);
	CHECKC_INT(syms__resolve_user(s, ch.pid, leaf, &r), 0); /* untracked: tracks itself */
	CHECKC(!r.resolved);
	CHECKC(!strncmp(r.frames[0].func, "fixture_stripped+0x", 19));
	CHECKC(r.frames[0].func == r.frames[0].sys_name);
	child_stop(&ch);
	syms__free(s);
}

TEST(cxx_demangled)
{
	uint64_t foo, bar;

	build_fixtures();
	if (!fx_skip && !have_cxx)
		SKIP("g++ missing or C++ fixture failed to build");
	{
		FIXTURE_BEGIN("fixture_cxx");
		foo = kv(&ch, "foo");
		bar = kv(&ch, "bar");
		CHECKC(foo && bar);
		CHECKC_INT(syms__track_pid(s, ch.pid), 0);
		CHECKC_INT(syms__resolve_user(s, ch.pid, foo, &r), 0);
		CHECKC(r.resolved);
		CHECKC_STR(r.frames[0].func, "ns::foo(int)");
		CHECKC_STR(r.frames[0].sys_name, "_ZN2ns3fooEi");
		CHECKC_INT(r.frames[0].line, marker_line(fixture_cc, "NS_FOO"));
		CHECKC_INT(syms__resolve_user(s, ch.pid, bar, &r), 0);
		CHECKC(r.resolved);
		CHECKC_STR(r.frames[0].func, "bar<float>(float)");
		CHECKC_STR(r.frames[0].sys_name, "_Z3barIfET_S0_");
		CHECKC_INT(r.frames[0].line, marker_line(fixture_cc, "BAR"));
		child_stop(&ch);
		syms__free(s);
	}
}

TEST(perf_map)
{
	char path[64];
	uint64_t anon;
	FILE *f;
	int pid;

	FIXTURE_BEGIN("fixture_nopie");
	pid = ch.pid;
	anon = kv(&ch, "anon");
	CHECKC(anon);
	CHECKC_INT(syms__track_pid(s, ch.pid), 0);
	/* before the JIT writes its map: an anonymous mapping is unknown */
	CHECKC_INT(syms__resolve_user(s, ch.pid, anon + 0x110, &r), 0);
	CHECKC(!r.resolved);
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", ch.pid);
	f = fopen(path, "w");
	CHECKC(f);
	fprintf(f, "%" PRIx64 " 40 jit_old\n", anon + 0x100);
	fprintf(f, "%" PRIx64 " 80 LazyCompile:*foo bar.js:12\n", anon + 0x100); /* reuses the range */
	fprintf(f, "garbage line\n");
	fprintf(f, "%" PRIx64 " 10 jit_two\n", anon + 0x1000);
	fclose(f);
	CHECKC_INT(syms__track_pid(s, ch.pid), 0);
	CHECKC_INT(syms__resolve_user(s, ch.pid, anon + 0x110, &r), 0);
	CHECKC(r.resolved);
	CHECKC_STR(r.module, "[perf-map]");
	CHECKC_STR(r.frames[0].func, "LazyCompile:*foo bar.js:12");
	CHECKC_INT(r.rel_addr, 0x10);
	/* appended later: picked up incrementally */
	f = fopen(path, "a");
	CHECKC(f);
	fprintf(f, "0x%" PRIx64 " 0x10 jit_three\n", anon + 0x2000);
	fclose(f);
	CHECKC_INT(syms__track_pid(s, ch.pid), 0);
	CHECKC_INT(syms__resolve_user(s, ch.pid, anon + 0x2008, &r), 0);
	CHECKC_STR(r.frames[0].func, "jit_three");
	CHECKC_INT(syms__resolve_user(s, ch.pid, anon + 0x1008, &r), 0);
	CHECKC_STR(r.frames[0].func, "jit_two");
	unlink(path);
	child_stop(&ch);
	/* still there after the exit (and after the file is gone) */
	CHECKC_INT(syms__resolve_user(s, pid, anon + 0x108, &r), 0);
	CHECKC_STR(r.frames[0].func, "LazyCompile:*foo bar.js:12");
	syms__free(s);
}

/* A target that is not root must not get gpubpf (root) to read a file it could not read
 * itself into a profile: its perf map is only ever its own regular file, reached through
 * no symlink, and a FIFO or device there is never opened. */
TEST(perf_map_is_the_targets_own)
{
	char path[64], secret_dir[] = "/tmp/gpubpf-secret-XXXXXX", secret[128];
	uint64_t anon;
	FILE *f;
	int fd;

	build_fixtures();
	if (fx_skip)
		SKIP("%s", fx_skip);
	if (geteuid() != 0)
		SKIP("needs root to run the target as another user");
	CHECK(mkdtemp(secret_dir) != NULL);
	chmod(fx_dir, 0755);
	child_uid = 65534;
	{
		FIXTURE_BEGIN("fixture_nopie");
		child_uid = 0;
		anon = kv(&ch, "anon");
		CHECKC(anon);
		snprintf(path, sizeof(path), "/tmp/perf-%d.map", ch.pid);
		snprintf(secret, sizeof(secret), "%s/secret", secret_dir);
		f = fopen(secret, "w"); /* root's, mode 0600 in a 0700 directory */
		CHECKC(f);
		fprintf(f, "%" PRIx64 " 10000 ROOT_ONLY_SECRET\n", anon);
		fclose(f);
		chmod(secret, 0600);

		/* a symlink to it, made by the target's user */
		unlink(path);
		CHECKC(symlink(secret, path) == 0);
		CHECKC(lchown(path, 65534, 65534) == 0);
		CHECKC_INT(syms__track_pid(s, ch.pid), 0);
		CHECKC_INT(syms__resolve_user(s, ch.pid, anon + 0x10, &r), 0);
		CHECKC(!r.resolved);

		/* a hard copy that belongs to root, not to the target */
		unlink(path);
		f = fopen(path, "w");
		CHECKC(f);
		fprintf(f, "%" PRIx64 " 10000 ROOT_OWNED\n", anon);
		fclose(f);
		CHECKC_INT(syms__track_pid(s, ch.pid), 0);
		CHECKC_INT(syms__resolve_user(s, ch.pid, anon + 0x10, &r), 0);
		CHECKC(!r.resolved);

		/* a FIFO: refused, and without blocking on it (no writer ever comes) */
		unlink(path);
		CHECKC(mkfifo(path, 0666) == 0);
		CHECKC(chown(path, 65534, 65534) == 0);
		CHECKC_INT(syms__track_pid(s, ch.pid), 0);
		CHECKC_INT(syms__resolve_user(s, ch.pid, anon + 0x10, &r), 0);
		CHECKC(!r.resolved);

		/* its own regular file: read */
		unlink(path);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
		CHECKC(fd >= 0);
		CHECKC(fchown(fd, 65534, 65534) == 0);
		f = fdopen(fd, "w");
		CHECKC(f);
		fprintf(f, "%" PRIx64 " 10000 jit_own\n", anon);
		fclose(f);
		CHECKC_INT(syms__track_pid(s, ch.pid), 0);
		CHECKC_INT(syms__resolve_user(s, ch.pid, anon + 0x10, &r), 0);
		CHECKC(r.resolved);
		CHECKC_STR(r.frames[0].func, "jit_own");
		unlink(path);
		child_stop(&ch);
		syms__free(s);
	}
	unlink(secret);
	rmdir(secret_dir);
}

TEST(find_symbol)
{
	const char *path = NULL;
	uint64_t off = 0, leaf;
	char want[512];

	FIXTURE_BEGIN("fixture_pie");
	leaf = kv(&ch, "leaf");
	CHECKC_INT(syms__track_pid(s, ch.pid), 0);
	CHECKC_INT(syms__resolve_user(s, ch.pid, leaf, &r), 0);
	CHECKC_INT(syms__find_symbol(s, ch.pid, "fixture_leaf", &path, &off), 0);
	snprintf(want, sizeof(want), "/proc/%d/root%s/fixture_pie", ch.pid, fx_dir);
	CHECKC_STR(path, want);
	CHECKC_INT(off, leaf - r.map_start + r.map_offset);
	CHECKC(access(path, R_OK) == 0);
	CHECKC_INT(syms__find_symbol(s, ch.pid, "lib_func", &path, &off), 0);
	CHECKC_STR(base_of(path), "libfixture.so");
	CHECKC_INT(syms__resolve_user(s, ch.pid, kv(&ch, "lib"), &r), 0);
	CHECKC_INT(off, kv(&ch, "lib") - r.map_start + r.map_offset);
	/* from libc's .dynsym */
	CHECKC_INT(syms__find_symbol(s, ch.pid, "malloc", &path, &off), 0);
	CHECKC(strstr(path, "libc"));
	CHECKC_INT(syms__find_symbol(s, ch.pid, "no_such_symbol_anywhere", &path, &off), -ENOENT);
	child_stop(&ch);
	syms__free(s);
}

TEST(many_processes_share_objects_and_rate)
{
	struct child kids[4];
	struct timespec t0, t1;
	uint64_t leaf;
	int n = 0;
	double secs;

	FIXTURE_BEGIN("fixture_pie");
	leaf = kv(&ch, "leaf");
	for (int i = 0; i < 4; i++)
		if (!child_start(&kids[i], "fixture_pie"))
			n++;
	for (int i = 0; i < n; i++) {
		CHECKC_INT(syms__track_pid(s, kids[i].pid), 0);
		CHECKC_INT(syms__resolve_user(s, kids[i].pid, kv(&kids[i], "leaf"), &r), 0);
		CHECKC_STR(r.frames[0].func, "fixture_leaf");
	}
	for (int i = 0; i < n; i++)
		child_stop(&kids[i]);
	/* distinct addresses across the text of libc: must stay well above a few thousand/s */
	CHECKC_INT(syms__find_symbol(s, ch.pid, "malloc", &(const char *){NULL}, &(uint64_t){0}), 0);
	CHECKC_INT(syms__resolve_user(s, ch.pid, leaf, &r), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 5000; i++)
		CHECKC_INT(syms__resolve_user(s, ch.pid, leaf + (uint64_t)(i % 40), &r), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	CHECKC(secs < 2.0);
	child_stop(&ch);
	syms__free(s);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	signal(SIGPIPE, SIG_IGN);
	RUN(pie_and_exit);
	RUN(non_pie);
	RUN(stripped_with_build_id_debug_file);
	RUN(cxx_demangled);
	RUN(perf_map);
	RUN(perf_map_is_the_targets_own);
	RUN(find_symbol);
	RUN(many_processes_share_objects_and_rate);
	remove_fixtures();
	return T_END();
}
