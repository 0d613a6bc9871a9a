// SPDX-License-Identifier: MIT
/* Pyroscope's ingest contract (userspace/cmd/pyroscope.c): label names and values, service
 * names, the name with its labels, URL encoding, the query and the URL. The rules come
 * from grafana/pyroscope's api/model/labelset (parser and validate.go) and
 * pkg/validation (label names past sanitizing). */
#include <errno.h>
#include <string.h>

#include "pyroscope.h"
#include "test.h"

TEST(label_names)
{
	CHECK(pyro__valid_label_name("host"));
	CHECK(pyro__valid_label_name("local_rank"));
	CHECK(pyro__valid_label_name("_x9"));
	CHECK(!pyro__valid_label_name(""));
	CHECK(!pyro__valid_label_name(NULL));
	CHECK(!pyro__valid_label_name("__name__")); /* private: dropped by the server */
	CHECK(!pyro__valid_label_name("9lives"));   /* legacy names start with a letter or _ */
	CHECK(!pyro__valid_label_name("a.b"));	    /* the server would rename it a_b */
	CHECK(!pyro__valid_label_name("a-b"));
	CHECK(!pyro__valid_label_name("a b"));
	CHECK(!pyro__valid_label_name("ünï"));
	CHECK(!pyro__valid_label_name("a234567890123456789012345678901234567890123456789012345678901234"));
}

TEST(values)
{
	char buf[300], big[1000];

	CHECK_INT(pyro__clean_value(buf, sizeof(buf), "  train step  "), 10);
	CHECK_STR(buf, "train step");
	pyro__clean_value(buf, sizeof(buf), "a,b}c{d=e\"f'g\\h\ti\xc3\xa9");
	CHECK_STR(buf, "a_b_c_d_e_f_g_h_i__");
	CHECK_INT(pyro__clean_value(buf, sizeof(buf), ""), 0);
	CHECK_INT(pyro__clean_value(buf, sizeof(buf), NULL), 0);
	CHECK_INT(pyro__clean_value(buf, 4, "abcdef"), 3);
	CHECK_STR(buf, "abc");
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK_INT(pyro__clean_value(buf, sizeof(buf), big), PYRO_MAX_VALUE);
}

TEST(services)
{
	char buf[200];

	pyro__clean_service(buf, sizeof(buf), "train.py");
	CHECK_STR(buf, "train.py");
	pyro__clean_service(buf, sizeof(buf), "team/llm-70b_v2");
	CHECK_STR(buf, "team/llm-70b_v2");
	pyro__clean_service(buf, sizeof(buf), "my app{x}");
	CHECK_STR(buf, "my_app_x_");
	pyro__clean_service(buf, sizeof(buf), "");
	CHECK_STR(buf, "unknown");
	pyro__clean_service(buf, sizeof(buf), NULL);
	CHECK_STR(buf, "unknown");
}

TEST(names)
{
	struct pyro_label l[] = {
	    {"host", "node-1"}, {"pid", "42"}, {"empty", ""}, {"rank", "0"}, {"gpu", NULL},
	};
	char buf[256];

	CHECK_INT(pyro__name(buf, sizeof(buf), "train.py", l, 5), 0);
	CHECK_STR(buf, "train.py{host=node-1,pid=42,rank=0}");
	CHECK_INT(pyro__name(buf, sizeof(buf), "svc", NULL, 0), 0);
	CHECK_STR(buf, "svc{}");
	CHECK_INT(pyro__name(buf, 8, "train.py", l, 5), -ENOSPC);
	CHECK_INT(pyro__name(buf, sizeof(buf), "bad name", l, 1), -EINVAL);
	CHECK_INT(pyro__name(buf, sizeof(buf), "", l, 1), -EINVAL);
	{
		struct pyro_label bad[] = {{"host", "a,b"}};
		struct pyro_label badk[] = {{"__name__", "x"}};
		struct pyro_label sp[] = {{"host", " x"}};

		CHECK_INT(pyro__name(buf, sizeof(buf), "s", bad, 1), -EINVAL);
		CHECK_INT(pyro__name(buf, sizeof(buf), "s", badk, 1), -EINVAL);
		CHECK_INT(pyro__name(buf, sizeof(buf), "s", sp, 1), -EINVAL);
	}
}

TEST(urlencode_and_query)
{
	char buf[512];

	CHECK_INT(pyro__urlencode(buf, sizeof(buf), "svc{host=a b,x=/y&z}~-._"), 0);
	CHECK_STR(buf, "svc%7Bhost%3Da%20b%2Cx%3D%2Fy%26z%7D~-._");
	CHECK_INT(pyro__urlencode(buf, 4, "abcd"), -ENOSPC);
	CHECK_INT(pyro__urlencode(buf, 4, "a{"), -ENOSPC);
	CHECK_INT(pyro__urlencode(buf, 4, "abc"), 0);
	CHECK_INT(pyro__query(buf, sizeof(buf), "s{pid=1}", 1700000000, 1700000015, 99), 0);
	CHECK_STR(buf, "name=s%7Bpid%3D1%7D&from=1700000000&until=1700000015&spyName=gpubpf&sampleRate=99");
	CHECK_INT(pyro__query(buf, 30, "s{pid=1}", 1700000000, 1700000015, 99), -ENOSPC);
}

TEST(urls)
{
	char buf[256];

	CHECK_INT(pyro__url(buf, sizeof(buf), "http://127.0.0.1:4040", "name=a"), 0);
	CHECK_STR(buf, "http://127.0.0.1:4040/ingest?name=a");
	CHECK_INT(pyro__url(buf, sizeof(buf), "https://p.example.com/pyroscope//", "q"), 0);
	CHECK_STR(buf, "https://p.example.com/pyroscope/ingest?q");
	CHECK_INT(pyro__url(buf, sizeof(buf), "ftp://x", "q"), -EINVAL);
	CHECK_INT(pyro__url(buf, sizeof(buf), "127.0.0.1:4040", "q"), -EINVAL);
	CHECK_INT(pyro__url(buf, sizeof(buf), "https://", "q"), -EINVAL);
	CHECK_INT(pyro__url(buf, sizeof(buf), "http:///", "q"), -EINVAL);
	CHECK_INT(pyro__url(buf, 10, "http://a", "q"), -ENOSPC);
}

int main(int argc, char **argv)
{
	T_BEGIN(argv);
	RUN(label_names);
	RUN(values);
	RUN(services);
	RUN(names);
	RUN(urlencode_and_query);
	RUN(urls);
	return T_END();
}
