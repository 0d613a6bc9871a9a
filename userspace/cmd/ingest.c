// SPDX-License-Identifier: MIT
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ingest.h"
#include "log.h"
#include "pyroscope.h"
#include "readfile.h"
#include "version.h" /* GPUBPF_VERSION, generated (Makefile) */

int ingest__read_token(const char *path, char *buf, size_t cap)
{
	size_t n = 0;
	char *t = readfile__path(path, 4096, false, &n);

	if (!t)
		return errno == EFBIG ? -EINVAL : -errno;
	while (n > 0 && (t[n - 1] == '\n' || t[n - 1] == '\r' || t[n - 1] == ' ' || t[n - 1] == '\t'))
		n--;
	t[n] = '\0';
	for (size_t i = 0; i < n; i++) {
		if (t[i] < 0x21 || t[i] > 0x7e) {
			explicit_bzero(t, n);
			free(t);
			return -EINVAL;
		}
	}
	if (!n || n >= cap) {
		free(t);
		return -EINVAL;
	}
	memcpy(buf, t, n + 1);
	explicit_bzero(t, n);
	free(t);
	return 0;
}

#ifndef GPUBPF_NO_CURL

#include <curl/curl.h>

#define BASE_RETRY_S 1.0
#define CONFIG_RETRY_S 30.0
#define BODY_KEEP 300

struct ingest {
	struct ingest_opts o;
	struct spool *sp;
	struct agent_stats *st;
	pthread_t thread;
	bool running;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t kicks;
	bool stop;
	double deadline; /* CLOCK_MONOTONIC: stop trying past it */
	CURL *curl;
	char token[4096];
	char body[BODY_KEEP + 1];
	size_t body_len;
	/* what the log said last, so an outage is one line and its end another */
	int state; /* 0 delivering, 1 transient failure, 2 configuration */
	double failing_since;
	unsigned fails;
	unsigned seed;
	uint64_t rejected_said;
	double rejected_at;
};

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct ingest *in = ctx;
	size_t n = size * nmemb, room = BODY_KEEP - in->body_len;

	if (room) {
		size_t k = n < room ? n : room;

		memcpy(in->body + in->body_len, data, k);
		in->body_len += k;
		in->body[in->body_len] = '\0';
	}
	return n;
}

/* Abort a transfer when stopping and the flush time is over. */
static int on_progress(void *ctx, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct ingest *in = ctx;
	bool abort_now;

	(void)dt, (void)dn, (void)ut, (void)un;
	pthread_mutex_lock(&in->mu);
	abort_now = in->stop && mono() >= in->deadline;
	pthread_mutex_unlock(&in->mu);
	return abort_now;
}

/* The server's answer, printable and short, for a log line. */
static const char *body_text(struct ingest *in)
{
	for (size_t i = 0; i < in->body_len; i++)
		if ((unsigned char)in->body[i] < 0x20 || (unsigned char)in->body[i] > 0x7e)
			in->body[i] = ' ';
	return in->body;
}

enum outcome { SENT, RETRY, CONFIG, REJECTED };

static enum outcome post(struct ingest *in, const struct spool_item *it, char *why, size_t wlen)
{
	char url[8192], auth[4200], errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdrs = NULL;
	struct rusage r0, r1;
	curl_mimepart *part;
	curl_mime *mime;
	CURLcode rc;
	long code = 0;
	enum outcome out;

	if (pyro__url(url, sizeof(url), in->o.server, it->meta)) {
		snprintf(why, wlen, "the upload's URL is too long");
		return REJECTED;
	}
	mime = curl_mime_init(in->curl);
	part = curl_mime_addpart(mime);
	curl_mime_name(part, "profile");
	curl_mime_filename(part, "profile.pb.gz");
	curl_mime_type(part, "application/octet-stream");
	curl_mime_data(part, it->data, it->len);
	if (in->token[0]) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", in->token);
		hdrs = curl_slist_append(hdrs, auth);
		explicit_bzero(auth, sizeof(auth));
	}
	/* no 100-continue round trip for a few kilobytes */
	hdrs = curl_slist_append(hdrs, "Expect:");
	curl_easy_reset(in->curl);
	curl_easy_setopt(in->curl, CURLOPT_URL, url);
	curl_easy_setopt(in->curl, CURLOPT_MIMEPOST, mime);
	curl_easy_setopt(in->curl, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(in->curl, CURLOPT_USERAGENT, "gpubpf/" GPUBPF_VERSION);
	curl_easy_setopt(in->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(in->curl, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(in->curl, CURLOPT_TIMEOUT, 60L);
	curl_easy_setopt(in->curl, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(in->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(in->curl, CURLOPT_WRITEDATA, in);
	curl_easy_setopt(in->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(in->curl, CURLOPT_XFERINFODATA, in);
	curl_easy_setopt(in->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(in->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	if (in->o.ca_file)
		curl_easy_setopt(in->curl, CURLOPT_CAINFO, in->o.ca_file);
	in->body_len = 0;
	in->body[0] = '\0';
	getrusage(RUSAGE_THREAD, &r0);
	rc = curl_easy_perform(in->curl);
	getrusage(RUSAGE_THREAD, &r1);
	atomic_fetch_add(&in->st->uploads, 1);
	atomic_fetch_add(
	    &in->st->upload_cpu_us,
	    (uint64_t)((r1.ru_utime.tv_sec - r0.ru_utime.tv_sec + r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) * 1000000L +
		       (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) + (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec)));
	curl_easy_getinfo(in->curl, CURLINFO_RESPONSE_CODE, &code);
	curl_slist_free_all(hdrs);
	curl_mime_free(mime);
	if (rc != CURLE_OK) {
		snprintf(why, wlen, "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
		switch (rc) {
		case CURLE_PEER_FAILED_VERIFICATION:
		case CURLE_SSL_CACERT_BADFILE:
		case CURLE_SSL_CERTPROBLEM:
		case CURLE_UNSUPPORTED_PROTOCOL:
		case CURLE_URL_MALFORMAT:
			return CONFIG;
		default:
			return RETRY;
		}
	}
	if (code >= 200 && code < 300)
		return SENT;
	snprintf(why, wlen, "HTTP %ld%s%s", code, in->body_len ? ": " : "", body_text(in));
	if (code == 401 || code == 403 || code == 404)
		out = CONFIG;
	else if (code == 408 || code == 429 || code >= 500 || code < 200)
		out = RETRY;
	else if (code >= 400)
		out = REJECTED;
	else
		out = RETRY; /* 3xx: a redirect is not followed with a body */
	return out;
}

static double backoff(struct ingest *in, double base)
{
	double d = base;

	for (unsigned i = 1; i < in->fails && d < in->o.retry_max; i++)
		d *= 2;
	if (d > in->o.retry_max)
		d = in->o.retry_max;
	/* half fixed, half random: many agents after one outage do not come back at once */
	return d / 2 + d / 2 * ((double)rand_r(&in->seed) / RAND_MAX);
}

static void note_failure(struct ingest *in, enum outcome o, const char *why)
{
	struct spool_stats ss;

	spool__stats(in->sp, &ss);
	if (o == CONFIG) {
		if (in->state != 2) {
			if (strstr(why, "HTTP 401") || strstr(why, "HTTP 403"))
				pr_err("agent: %s refused the auth token (%s): check --auth-token-file%s%s; the %llu "
				       "profiles spooled stay there and are tried again every %.0f s at most",
				       in->o.server, why, in->o.token_file ? " " : " (none given)",
				       in->o.token_file ? in->o.token_file : "", (unsigned long long)ss.queued,
				       in->o.retry_max);
			else
				pr_err("agent: cannot deliver profiles to %s (%s): check --server%s; the %llu profiles "
				       "spooled stay there and are tried again every %.0f s at most",
				       in->o.server, why, strstr(why, "HTTP 404") ? " (the ingest path)" : " and TLS",
				       (unsigned long long)ss.queued, in->o.retry_max);
			in->failing_since = mono();
		}
		in->state = 2;
	} else if (in->state == 0) {
		pr_warn("agent: cannot deliver profiles to %s: %s; they wait in the spool (%llu now) and are retried "
			"with backoff",
			in->o.server, why, (unsigned long long)ss.queued);
		in->state = 1;
		in->failing_since = mono();
	}
}

static void note_success(struct ingest *in)
{
	if (in->state) {
		struct spool_stats ss;

		spool__stats(in->sp, &ss);
		fprintf(stderr, "gpubpf: agent: %s accepts profiles again after %.0f s; %llu spooled to deliver\n",
			in->o.server, mono() - in->failing_since, (unsigned long long)ss.queued);
	}
	in->state = 0;
	in->fails = 0;
}

static void note_rejected(struct ingest *in, const char *why)
{
	uint64_t n = atomic_fetch_add(&in->st->rejected, 1) + 1;

	/* one line a minute at most: a server that refuses everything must not flood */
	if (mono() - in->rejected_at >= 60 || !in->rejected_said) {
		pr_warn("agent: %s refused a profile (%s): it was dropped (%llu refused in all)", in->o.server, why,
			(unsigned long long)n);
		in->rejected_at = mono();
		in->rejected_said = n;
	}
}

/* Wait until T (CLOCK_MONOTONIC), a kick when WAKE, or a stop. */
static void wait_until(struct ingest *in, double t, bool wake)
{
	struct timespec ts;
	uint64_t k;

	pthread_mutex_lock(&in->mu);
	k = in->kicks;
	while (!in->stop && (!wake || in->kicks == k)) {
		double now = mono();

		if (now >= t)
			break;
		if (t - now > 3600)
			t = now + 3600;
		ts.tv_sec = (time_t)t;
		ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
		pthread_cond_timedwait(&in->cv, &in->mu, &ts);
	}
	pthread_mutex_unlock(&in->mu);
}

static void *run(void *arg)
{
	struct ingest *in = arg;
	double retry_at = 0;

	for (;;) {
		struct spool_item it;
		enum outcome o;
		char why[512];
		bool stopping;
		int err;

		pthread_mutex_lock(&in->mu);
		stopping = in->stop;
		pthread_mutex_unlock(&in->mu);
		if (stopping && mono() >= in->deadline)
			break;
		if (mono() < retry_at) {
			if (stopping)
				break; /* the server is failing: what waits stays spooled */
			wait_until(in, retry_at, false);
			continue;
		}
		err = spool__take(in->sp, &it);
		if (err == -ENOENT || err == -EBUSY) {
			if (stopping)
				break;
			wait_until(in, mono() + 1, true);
			continue;
		}
		if (err) {
			wait_until(in, mono() + 1, false);
			continue;
		}
		o = post(in, &it, why, sizeof(why));
		if (o == SENT) {
			atomic_fetch_add(&in->st->sent, 1);
			atomic_fetch_add(&in->st->sent_bytes, it.len);
			spool__done(in->sp, &it);
			note_success(in);
			continue;
		}
		if (o == REJECTED) {
			spool__done(in->sp, &it);
			note_rejected(in, why);
			in->fails = 0;
			continue;
		}
		spool__release(in->sp, &it);
		atomic_fetch_add(&in->st->send_failures, 1);
		in->fails++;
		note_failure(in, o, why);
		retry_at = mono() + backoff(in, o == CONFIG ? CONFIG_RETRY_S : BASE_RETRY_S);
		if (o == CONFIG && in->o.token_file) {
			/* fixed on disk since? */
			char t[4096];

			if (!ingest__read_token(in->o.token_file, t, sizeof(t)))
				memcpy(in->token, t, sizeof(t));
			explicit_bzero(t, sizeof(t));
		}
	}
	return NULL;
}

static bool loopback(const char *url)
{
	const char *h = strstr(url, "://");

	h = h ? h + 3 : url;
	return !strncmp(h, "127.", 4) || !strncasecmp(h, "localhost", 9) || !strncmp(h, "[::1]", 5);
}

struct ingest *ingest__start(const struct ingest_opts *o, struct spool *sp, struct agent_stats *st)
{
	struct ingest *in = calloc(1, sizeof(*in));
	pthread_condattr_t ca;
	sigset_t all, old;
	char probe[64];
	int err;

	if (!in)
		return NULL;
	in->o = *o;
	in->sp = sp;
	in->st = st;
	in->seed = (unsigned)getpid() ^ (unsigned)time(NULL);
	pthread_mutex_init(&in->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&in->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pyro__url(probe, sizeof(probe), o->server, "") == -EINVAL) {
		pr_err("agent: --server %s: expected http://HOST[:PORT] or https://HOST[:PORT]", o->server);
		err = -EINVAL;
		goto fail;
	}
	if (o->token_file) {
		struct stat sb;

		err = ingest__read_token(o->token_file, in->token, sizeof(in->token));
		if (err) {
			pr_err("agent: --auth-token-file %s: %s", o->token_file,
			       err == -EINVAL ? "expected one line with the token (printable, no spaces)"
					      : strerror(-err));
			goto fail;
		}
		if (stat(o->token_file, &sb) == 0 && (sb.st_mode & 077))
			pr_warn("agent: %s is readable by others than its owner: chmod 600 it", o->token_file);
		if (!strncasecmp(o->server, "http://", 7) && !loopback(o->server))
			pr_warn("agent: the auth token goes to %s in clear text: use https", o->server);
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT)) {
		pr_err("agent: cannot initialize libcurl");
		err = -ENOMEM;
		goto fail;
	}
	in->curl = curl_easy_init();
	if (!in->curl) {
		pr_err("agent: cannot initialize libcurl");
		err = -ENOMEM;
		goto fail;
	}
	/* Signals are the main thread's: its poll must see them. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	err = -pthread_create(&in->thread, NULL, run, in);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		pr_err("agent: cannot start the sender thread: %s", strerror(-err));
		goto fail;
	}
	in->running = true;
	return in;
fail:
	ingest__stop(in, 0);
	errno = -err;
	return NULL;
}

void ingest__kick(struct ingest *in)
{
	if (!in)
		return;
	pthread_mutex_lock(&in->mu);
	in->kicks++;
	pthread_cond_broadcast(&in->cv);
	pthread_mutex_unlock(&in->mu);
}

void ingest__stop(struct ingest *in, double flush_s)
{
	if (!in)
		return;
	if (in->running) {
		pthread_mutex_lock(&in->mu);
		in->stop = true;
		in->deadline = mono() + flush_s;
		pthread_cond_broadcast(&in->cv);
		pthread_mutex_unlock(&in->mu);
		pthread_join(in->thread, NULL);
	}
	if (in->curl) {
		curl_easy_cleanup(in->curl);
		curl_global_cleanup();
	}
	explicit_bzero(in->token, sizeof(in->token));
	pthread_cond_destroy(&in->cv);
	pthread_mutex_destroy(&in->mu);
	free(in);
}

#else /* GPUBPF_NO_CURL: the static build (make static) has no libcurl */

struct ingest *ingest__start(const struct ingest_opts *o, struct spool *sp, struct agent_stats *st)
{
	(void)o, (void)sp, (void)st;
	pr_err("agent: this gpubpf is built without libcurl (make static): --server is not available here; "
	       "write profiles with --output-dir instead");
	errno = ENOTSUP;
	return NULL;
}

void ingest__kick(struct ingest *in)
{
	(void)in;
}

void ingest__stop(struct ingest *in, double flush_s)
{
	(void)in, (void)flush_s;
}

#endif
