/* SPDX-License-Identifier: MIT */
/* C++ (Itanium ABI) demangling through libstdc++'s __cxa_demangle. */
#ifndef GPUBPF_DEMANGLE_H
#define GPUBPF_DEMANGLE_H

#include <stddef.h>

/* Longest mangled name we hand to the demangler: it recurses on the input, and symbol
 * names come from untrusted files. */
#define DEMANGLE_MAX_INPUT 4096

/* Demangled NAME without a leading return type ("void bar<float>(float)" becomes
 * "bar<float>(float)", so template instances read like ordinary functions in a flame
 * graph). malloc'd; NULL when NAME is not a mangled C++ name or cannot be demangled
 * (errno ENOMEM only for allocation failure). */
char *demangle(const char *name);

/* Strip a leading return type from a demangled signature, in place. Exposed for tests. */
void demangle__strip_return_type(char *s);

#endif /* GPUBPF_DEMANGLE_H */
