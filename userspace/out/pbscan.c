// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <zlib.h>

#include "pbscan.h"

enum { ST_TAG, ST_VARINT, ST_LEN, ST_SKIP };

void pbscan__init(struct pbscan *s)
{
	s->state = ST_TAG;
	s->acc = 0;
	s->shift = 0;
	s->tag = s->skip = 0;
	s->bad_field = 0;
	s->bad_len = 0;
}

/* One more byte of a varint: 1 when complete (in s->acc), 0 when more follow, -EBADMSG
 * past ten bytes. */
static int varint_byte(struct pbscan *s, unsigned char b)
{
	if (s->shift >= 64)
		return -EBADMSG;
	s->acc |= (uint64_t)(b & 0x7f) << s->shift;
	s->shift += 7;
	return !(b & 0x80);
}

int pbscan__feed(struct pbscan *s, const unsigned char *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		int r;

		if (s->state == ST_SKIP) {
			uint64_t take = n - i < s->skip ? n - i : s->skip;

			i += (size_t)take;
			s->skip -= take;
			if (!s->skip)
				s->state = ST_TAG;
			continue;
		}
		r = varint_byte(s, p[i++]);
		if (r < 0)
			return r;
		if (!r)
			continue;
		if (s->state == ST_TAG) {
			s->tag = s->acc;
			if (s->tag >> 3 == 0)
				return -EBADMSG;
			switch (s->tag & 7) {
			case 0:
				s->state = ST_VARINT;
				break;
			case 1:
				s->state = ST_SKIP;
				s->skip = 8;
				break;
			case 2:
				s->state = ST_LEN;
				break;
			case 5:
				s->state = ST_SKIP;
				s->skip = 4;
				break;
			default: /* groups (3, 4) and 6, 7: not in any message we read */
				return -EBADMSG;
			}
		} else if (s->state == ST_VARINT) {
			s->state = ST_TAG;
		} else { /* ST_LEN */
			uint64_t limit = (s->tag >> 3) == s->string_field ? s->max_string : s->max_field;

			if (s->acc > limit) {
				s->bad_field = (uint32_t)(s->tag >> 3);
				s->bad_len = s->acc;
				return -EFBIG;
			}
			s->skip = s->acc;
			s->state = s->skip ? ST_SKIP : ST_TAG;
		}
		s->acc = 0;
		s->shift = 0;
	}
	return 0;
}

int pbscan__complete(const struct pbscan *s)
{
	return s->state == ST_TAG && s->shift == 0;
}

int pbscan__gunzip(struct pbscan *s, const unsigned char *in, size_t len, size_t max, unsigned char **out,
		   size_t *outlen)
{
	z_stream z = {0};
	size_t cap = 0, n = 0, left = len;
	unsigned char *buf = NULL;
	int zr, err = -EBADMSG;

	*out = NULL;
	*outlen = 0;
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
		return -ENOMEM;
	z.next_in = (Bytef *)in;
	for (;;) {
		size_t before = n;

		if (!z.avail_in && left) {
			z.avail_in = left > UINT32_MAX ? UINT32_MAX : (uInt)left;
			left -= z.avail_in;
		}
		if (n == cap) {
			/* grow in steps: a claim of gigabytes is refused after megabytes */
			size_t ncap = cap ? cap * 2 : (len < (1u << 20) ? len * 4 + 4096 : (1u << 22));
			unsigned char *nb;

			if (cap >= max + 1) {
				err = -EFBIG;
				break;
			}
			if (ncap > max + 1)
				ncap = max + 1;
			nb = realloc(buf, ncap);
			if (!nb) {
				err = -ENOMEM;
				break;
			}
			buf = nb;
			cap = ncap;
		}
		z.next_out = buf + n;
		z.avail_out = cap - n > UINT32_MAX ? UINT32_MAX : (uInt)(cap - n);
		zr = inflate(&z, Z_NO_FLUSH);
		n = (size_t)(z.next_out - buf);
		if (n > max) {
			err = -EFBIG;
			break;
		}
		if (s && n > before) {
			int e = pbscan__feed(s, buf + before, n - before);

			if (e) {
				err = e;
				break;
			}
		}
		if (zr == Z_STREAM_END) {
			err = 0;
			break;
		}
		/* no progress possible: the input ended before the gzip trailer */
		if (zr == Z_BUF_ERROR && !z.avail_in && !left)
			break;
		if (zr != Z_OK && zr != Z_BUF_ERROR)
			break;
	}
	inflateEnd(&z);
	if (err) {
		free(buf);
		return err;
	}
	*out = buf;
	*outlen = n;
	return 0;
}
