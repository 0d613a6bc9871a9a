/* SPDX-License-Identifier: MIT */
/* Refusing an oversized protobuf early. A small gzip file can inflate to gigabytes, and
 * one field of it (a 900 MB "string") costs that much memory and time before protobuf-c
 * could refuse the message. This scanner follows the top-level fields of a message as
 * the bytes arrive (while they are inflated) and stops at the first field longer than
 * allowed, after reading a few bytes of it rather than all of them. */
#ifndef GPUBPF_PBSCAN_H
#define GPUBPF_PBSCAN_H

#include <stddef.h>
#include <stdint.h>

struct pbscan {
	/* limits, set by the caller */
	uint64_t max_field;  /* longest length-delimited top-level field */
	uint64_t max_string; /* ... of field number STRING_FIELD */
	uint32_t string_field;
	/* state */
	int state;
	uint64_t acc;
	int shift;
	uint64_t tag, skip;
	/* set on an error: the field and the length it claimed */
	uint32_t bad_field;
	uint64_t bad_len;
};

/* Start scanning with the limits already in S. */
void pbscan__init(struct pbscan *s);

/* Feed the next N bytes. 0, -EFBIG for a field over its limit (bad_field, bad_len), or
 * -EBADMSG for bytes that are not protobuf wire format. */
int pbscan__feed(struct pbscan *s, const unsigned char *p, size_t n);

/* Whether the message ended between fields (not in the middle of one). */
int pbscan__complete(const struct pbscan *s);

/* Inflate the gzip stream IN into a malloc'd *OUT of at most MAX bytes, scanning it with
 * S as it comes. 0; -EFBIG for more than MAX bytes, or a field over its limit (see S);
 * -EBADMSG for a corrupt or truncated stream or non-protobuf bytes; -ENOMEM. */
int pbscan__gunzip(struct pbscan *s, const unsigned char *in, size_t len, size_t max, unsigned char **out,
		   size_t *outlen);

#endif /* GPUBPF_PBSCAN_H */
