// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "demangle.h"

extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

static const char anon_ns[] = "(anonymous namespace)";

/* Templates print their return type first ("void bar<float>(float)"); ordinary functions
 * do not. Find a space at nesting depth 0 before the parameter list: everything up to it
 * is the return type. "operator" spellings contain <, >, ( and spaces of their own, so
 * they end the scan: we would rather keep a return type than cut a name in half. */
void demangle__strip_return_type(char *s)
{
	int depth = 0;
	char *cut = NULL;

	if (!s)
		return;
	for (char *p = s; *p; p++) {
		if (!strncmp(p, anon_ns, sizeof(anon_ns) - 1)) {
			p += sizeof(anon_ns) - 2;
			continue;
		}
		if (!strncmp(p, "operator", 8) && (p == s || p[-1] == ':' || p[-1] == ' '))
			break;
		switch (*p) {
		case '<':
		case '[':
		case '{':
			depth++;
			break;
		case '>':
		case ']':
		case '}':
			depth--;
			break;
		case '(':
			if (depth == 0)
				goto done;
			depth++;
			break;
		case ')':
			depth--;
			break;
		case ' ':
			if (depth == 0)
				cut = p;
			break;
		}
		if (depth < 0)
			return;
	}
	return; /* not a function signature (a variable, a special name): leave alone */
done:
	if (cut && cut[1])
		memmove(s, cut + 1, strlen(cut + 1) + 1);
}

char *demangle(const char *name)
{
	char *out;
	int status = 0;

	if (!name || name[0] != '_' || name[1] != 'Z')
		return NULL;
	if (strnlen(name, DEMANGLE_MAX_INPUT + 1) > DEMANGLE_MAX_INPUT)
		return NULL;
	out = __cxa_demangle(name, NULL, NULL, &status);
	if (!out) {
		errno = status == -1 ? ENOMEM : EINVAL;
		return NULL;
	}
	demangle__strip_return_type(out);
	return out;
}
