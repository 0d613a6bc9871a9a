// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "pyroscope.h"

bool pyro__valid_label_name(const char *k)
{
	size_t n;

	if (!k || !*k || (k[0] == '_' && k[1] == '_'))
		return false;
	n = strlen(k);
	if (n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = k[i];
		bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';

		if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
			return false;
	}
	return true;
}

static bool value_byte_ok(unsigned char c)
{
	return c >= 0x20 && c < 0x7f && !strchr(",{}=\"'\\", c);
}

size_t pyro__clean_value(char *out, size_t cap, const char *in)
{
	size_t n = 0, lim = cap - 1 < PYRO_MAX_VALUE ? cap - 1 : PYRO_MAX_VALUE;

	if (!in)
		in = "";
	while (*in == ' ')
		in++;
	for (; *in && n < lim; in++)
		out[n++] = value_byte_ok((unsigned char)*in) ? *in : '_';
	while (n > 0 && out[n - 1] == ' ')
		n--;
	out[n] = '\0';
	return n;
}

static bool service_byte_ok(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
	       c == '-' || c == '/';
}

size_t pyro__clean_service(char *out, size_t cap, const char *in)
{
	size_t n = 0, lim = cap - 1 < PYRO_MAX_SERVICE ? cap - 1 : PYRO_MAX_SERVICE;

	for (; in && *in && n < lim; in++)
		out[n++] = service_byte_ok((unsigned char)*in) ? *in : '_';
	if (!n)
		n = (size_t)snprintf(out, cap, "%s", "unknown");
	out[n < cap ? n : cap - 1] = '\0';
	return strlen(out);
}

static int append(char *buf, size_t cap, size_t *off, const char *s)
{
	size_t n = strlen(s);

	if (*off + n >= cap)
		return -ENOSPC;
	memcpy(buf + *off, s, n + 1);
	*off += n;
	return 0;
}

int pyro__name(char *buf, size_t cap, const char *service, const struct pyro_label *l, int n)
{
	size_t off = 0;
	bool first = true;
	int err;

	if (!cap)
		return -ENOSPC;
	if (!service || !*service)
		return -EINVAL;
	for (const char *c = service; *c; c++)
		if (!service_byte_ok((unsigned char)*c))
			return -EINVAL;
	err = append(buf, cap, &off, service);
	if (!err)
		err = append(buf, cap, &off, "{");
	for (int i = 0; !err && i < n; i++) {
		const char *v = l[i].value;
		size_t vl = v ? strlen(v) : 0;

		if (!vl)
			continue;
		if (!pyro__valid_label_name(l[i].key) || vl > PYRO_MAX_VALUE || v[0] == ' ' || v[vl - 1] == ' ')
			return -EINVAL;
		for (size_t j = 0; j < vl; j++)
			if (!value_byte_ok((unsigned char)v[j]))
				return -EINVAL;
		err = append(buf, cap, &off, first ? "" : ",");
		if (!err)
			err = append(buf, cap, &off, l[i].key);
		if (!err)
			err = append(buf, cap, &off, "=");
		if (!err)
			err = append(buf, cap, &off, v);
		first = false;
	}
	if (!err)
		err = append(buf, cap, &off, "}");
	return err;
}

int pyro__urlencode(char *buf, size_t cap, const char *in)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t off = 0;

	for (; *in; in++) {
		unsigned char c = (unsigned char)*in;
		bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
			    c == '.' || c == '_' || c == '~';

		if (off + (keep ? 1 : 3) >= cap)
			return -ENOSPC;
		if (keep) {
			buf[off++] = (char)c;
		} else {
			buf[off++] = '%';
			buf[off++] = hex[c >> 4];
			buf[off++] = hex[c & 15];
		}
	}
	if (off >= cap)
		return -ENOSPC;
	buf[off] = '\0';
	return 0;
}

int pyro__query(char *buf, size_t cap, const char *name, int64_t from, int64_t until, int sample_rate)
{
	size_t off;
	int n, err;

	if (cap < 6)
		return -ENOSPC;
	memcpy(buf, "name=", 6);
	err = pyro__urlencode(buf + 5, cap - 5, name);
	if (err)
		return err;
	off = strlen(buf);
	n = snprintf(buf + off, cap - off, "&from=%" PRId64 "&until=%" PRId64 "&spyName=gpubpf&sampleRate=%d", from,
		     until, sample_rate);
	return n < 0 || (size_t)n >= cap - off ? -ENOSPC : 0;
}

int pyro__url(char *buf, size_t cap, const char *server, const char *query)
{
	size_t len;
	int n;

	if (!server || (strncasecmp(server, "http://", 7) && strncasecmp(server, "https://", 8)))
		return -EINVAL;
	len = strlen(server);
	while (len > 0 && server[len - 1] == '/')
		len--;
	if (len <= 8 && !strncasecmp(server, "https://", 8))
		return -EINVAL;
	if (len <= 7)
		return -EINVAL;
	n = snprintf(buf, cap, "%.*s/ingest?%s", (int)len, server, query);
	return n < 0 || (size_t)n >= cap ? -ENOSPC : 0;
}
