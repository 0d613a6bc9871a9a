/* SPDX-License-Identifier: MIT */
/* Text for a terminal from names a target chose (symbols, thread and process names,
 * paths): control characters in them would act on the user's terminal (retitle it,
 * clear it, move the cursor, answer back). Written through this stream they are shown
 * as escapes instead: C0 controls other than newline and tab, DEL, the C1 controls
 * (U+0080..U+009F) and bytes that are not valid UTF-8 become \xNN; valid UTF-8 text,
 * newlines and tabs pass unchanged. */
#ifndef GPUBPF_TTYESC_H
#define GPUBPF_TTYESC_H

#include <stdio.h>

/* A stream writing escaped text to OUT. fclose() it to flush it (OUT stays open).
 * NULL with errno set on failure. */
FILE *ttyesc__open(FILE *out);

/* Escape LEN bytes of IN into OUT (up to OUTLEN bytes, NUL-terminated); the state of an
 * unfinished UTF-8 sequence is not kept across calls: for tests and single strings.
 * Returns the length written (truncated to fit). */
size_t ttyesc__string(const char *in, size_t len, char *out, size_t outlen);

#endif /* GPUBPF_TTYESC_H */
