/* http.c — GETs over one reused curl easy handle: timeouts, redirects, checks and retries. */
#include "http.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"

#define ERROR_BODY_MAX 8192  /* enough for an S3 <Error> document; the rest is dropped */

struct http_client {
    CURL *curl;
    struct http_options opt;
    uint64_t rng;          /* xorshift state for the jitter; per client, so no shared state */
    uint64_t attempts;
};

void http_options_default(struct http_options *o)
{
    *o = (struct http_options){
        .connect_timeout_ms = 10000,
        .stall_timeout_s = 30,
        .stall_min_bps = 1,
        .total_timeout_ms = 0,
        .max_attempts = 3,
        .backoff_base_ms = 100,
        .backoff_cap_ms = 2000,
        .max_redirects = 5,
    };
}

int http_client_new(const struct http_options *o, struct http_client **out, struct err *e)
{
    *out = NULL;
    if (o->max_attempts < 1 || o->stall_timeout_s < 1 || o->backoff_base_ms < 0 || o->backoff_cap_ms < 0)
        return err_set(e, ERR_INVALID_ARG, "http options: attempts and stall timeout must be >= 1");
    /* Thread-safe and reference counted in curl >= 7.84; paired with the cleanup in http_client_free. */
    CURLcode gc = curl_global_init(CURL_GLOBAL_DEFAULT);
    if (gc != CURLE_OK)
        return err_set(e, ERR_INTERNAL, "curl_global_init: %s", curl_easy_strerror(gc));
    struct http_client *c = calloc(1, sizeof *c);
    if (!c) {
        curl_global_cleanup();
        return err_set(e, ERR_NOMEM, "http client: out of memory");
    }
    c->curl = curl_easy_init();
    if (!c->curl) {
        free(c);
        curl_global_cleanup();
        return err_set(e, ERR_INTERNAL, "curl_easy_init failed");
    }
    c->opt = *o;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    c->rng = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)c ^ (uint64_t)getpid();
    if (c->rng == 0)
        c->rng = 0x9e3779b97f4a7c15ull;
    *out = c;
    return ERR_OK;
}

void http_client_free(struct http_client *c)
{
    if (!c)
        return;
    curl_easy_cleanup(c->curl);
    free(c);
    curl_global_cleanup();
}

uint64_t http_client_attempts(const struct http_client *c)
{
    return c->attempts;
}

void http_result_free(struct http_result *r)
{
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* What follows "scheme://" (a scheme is letters, digits, '+', '-' and '.'), or NULL. */
static const char *after_scheme(const char *s)
{
    size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.");
    return n && strncmp(s + n, "://", 3) == 0 ? s + n + 3 : NULL;
}

/* s past "user:pass@": the last '@' of the authority, since a password may hold another. */
static const char *after_userinfo(const char *s)
{
    const char *at = memrchr(s, '@', strcspn(s, "/?#"));
    return at ? at + 1 : s;
}

void http_url_redact(const char *url, char *buf, size_t size)
{
    const char *start = url, *host = after_scheme(url);
    if (!host) {
        /* No scheme: the userinfo would start the string, and what follows it may be a URL. */
        start = after_userinfo(url);
        host = after_scheme(start);
        if (!host)
            host = start;
    }
    const char *rest = after_userinfo(host);
    snprintf(buf, size, "%.*s%.*s", (int)(host - start), start, (int)strcspn(rest, "?#"), rest);
}

/* ---- where the body goes ---- */

struct sink {
    FILE *file;           /* http_get_file; NULL for memory */
    char *buf;            /* memory: the body; file: the start of an error body */
    size_t len, cap;
    size_t limit;         /* memory cap for a successful body (error bodies: ERROR_BODY_MAX, cut short) */
    bool too_large;       /* a successful body passed limit */
    uint64_t received;
    bool write_failed;
    bool http_error;      /* status >= 300 after redirects: keep the body in memory for the message */
    bool head;            /* HEAD: no body, Content-Length is the object's size */
    long status;
    char etag[128];
};

static bool sink_append(struct sink *s, const char *p, size_t n)
{
    size_t limit = s->http_error ? ERROR_BODY_MAX : s->limit;
    if (!s->http_error && n > limit - s->len) {
        s->too_large = true;
        return false;
    }
    if (s->len >= limit)
        return true;
    if (n > limit - s->len)
        n = limit - s->len;
    if (n == 0)
        return true;
    if (buf_append(&s->buf, &s->len, &s->cap, p, n))
        return false;
    return true;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    struct sink *s = arg;
    size_t bytes = size * n;
    s->received += bytes;
    if (s->http_error || !s->file) {
        if (!sink_append(s, p, bytes)) {
            s->write_failed = true;
            return 0;
        }
        return bytes;
    }
    if (fwrite(p, 1, bytes, s->file) != bytes) {
        s->write_failed = true;
        return 0;
    }
    return bytes;
}

int http_header_parse(const char *p, size_t len, long *status, char *etag, size_t etag_size)
{
    if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) {
        /* The three digits after the first space, read within len: curl's lines end in no NUL. */
        const char *sp = memchr(p, ' ', len), *end = p + len;
        long st = 0;
        for (const char *q = sp ? sp + 1 : end; q < end && q - sp <= 3 && *q >= '0' && *q <= '9'; q++)
            st = st * 10 + (*q - '0');
        *status = st;
        return 1;
    }
    if (len > 5 && strncasecmp(p, "etag:", 5) == 0 && etag_size > 0) {
        const char *v = p + 5;
        size_t vl = len - 5;
        while (vl && (*v == ' ' || *v == '\t'))
            v++, vl--;
        while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' ' || v[vl - 1] == '\t'))
            vl--;
        if (vl >= etag_size)
            vl = etag_size - 1;
        memcpy(etag, v, vl);
        etag[vl] = '\0';
        return 2;
    }
    return 0;
}

/* Each response (redirects included) starts with a status line: remember the last one's status and ETag. */
static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    struct sink *s = arg;
    size_t len = size * n;
    long status;
    if (http_header_parse(p, len, &status, s->etag, sizeof s->etag) == 1) {
        /* A new response (after a redirect or a 100): what came before was not the object. */
        s->etag[0] = '\0';
        s->len = 0;
        if (s->buf)
            s->buf[0] = '\0';
        s->received = 0;
        s->status = status;
        s->http_error = s->status >= 300;
    }
    return len;
}

static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    const atomic_bool *cancel = arg;
    return cancel && atomic_load(cancel) ? 1 : 0;
}

/* ---- one attempt, and what to make of it ---- */

enum outcome { DONE, RETRY, FAIL };

static bool curl_code_retryable(CURLcode cc)
{
    switch (cc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return true;
    default:
        return false;
    }
}

static bool status_retryable(long st)
{
    return st == 429 || st == 500 || st == 502 || st == 503 || st == 504;
}

static int setup(struct http_client *c, const struct http_request *rq, struct sink *s,
                 struct curl_slist **hdrs, struct curl_slist **connect_to, char *errbuf, struct err *e)
{
    CURL *h = c->curl;
    curl_easy_reset(h);
    for (size_t i = 0; i < rq->n_headers; i++) {
        struct curl_slist *l = curl_slist_append(*hdrs, rq->headers[i]);
        if (!l)
            return err_set(e, ERR_NOMEM, "http headers: out of memory");
        *hdrs = l;
    }
    if (c->opt.connect_to) {
        *connect_to = curl_slist_append(NULL, c->opt.connect_to);
        if (!*connect_to)
            return err_set(e, ERR_NOMEM, "http connect_to: out of memory");
    }
    CURLcode cc = CURLE_OK;
#define SET(opt, val) do { if (cc == CURLE_OK) cc = curl_easy_setopt(h, opt, val); } while (0)
    SET(CURLOPT_URL, rq->url);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_FOLLOWLOCATION, 1L);
    SET(CURLOPT_MAXREDIRS, c->opt.max_redirects);
    SET(CURLOPT_CONNECTTIMEOUT_MS, c->opt.connect_timeout_ms);
    SET(CURLOPT_LOW_SPEED_TIME, c->opt.stall_timeout_s);
    SET(CURLOPT_LOW_SPEED_LIMIT, c->opt.stall_min_bps);
    SET(CURLOPT_TIMEOUT_MS, c->opt.total_timeout_ms);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_ERRORBUFFER, errbuf);
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, s);
    SET(CURLOPT_HEADERFUNCTION, on_header);
    SET(CURLOPT_HEADERDATA, s);
    SET(CURLOPT_USERAGENT, "traind");
    if (s->head)
        SET(CURLOPT_NOBODY, 1L);
    if (*hdrs)
        SET(CURLOPT_HTTPHEADER, *hdrs);
    if (*connect_to)
        SET(CURLOPT_CONNECT_TO, *connect_to);
    if (rq->user) {
        SET(CURLOPT_USERNAME, rq->user);
        SET(CURLOPT_PASSWORD, rq->password ? rq->password : "");
    }
    if (rq->aws_sigv4) {
        SET(CURLOPT_AWS_SIGV4, rq->aws_sigv4);
        /* Credentials go only to the host we signed for, never along a redirect. */
        SET(CURLOPT_UNRESTRICTED_AUTH, 0L);
    }
    if (c->opt.cancel) {
        SET(CURLOPT_XFERINFOFUNCTION, on_progress);
        SET(CURLOPT_XFERINFODATA, (void *)c->opt.cancel);
        SET(CURLOPT_NOPROGRESS, 0L);
    }
#undef SET
    if (cc != CURLE_OK)
        return err_set(e, ERR_INTERNAL, "curl_easy_setopt: %s", curl_easy_strerror(cc));
    return ERR_OK;
}

/* Runs one attempt and classifies it; e gets the reason for anything but DONE. */
static enum outcome attempt(struct http_client *c, const struct http_request *rq, struct sink *s,
                            const char *name, struct err *e)
{
    struct curl_slist *hdrs = NULL, *connect_to = NULL;
    char errbuf[CURL_ERROR_SIZE] = "";
    if (setup(c, rq, s, &hdrs, &connect_to, errbuf, e) != ERR_OK) {
        curl_slist_free_all(hdrs);
        curl_slist_free_all(connect_to);
        return FAIL;
    }
    const char *method = s->head ? "HEAD" : "GET";
    c->attempts++;
    CURLcode cc = curl_easy_perform(c->curl);
    curl_off_t clen = -1;
    curl_easy_getinfo(c->curl, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &clen);
    curl_slist_free_all(hdrs);
    curl_slist_free_all(connect_to);

    if (cc == CURLE_ABORTED_BY_CALLBACK) {
        err_set(e, ERR_CANCELLED, "%s %s: cancelled", method, name);
        return FAIL;
    }
    if (s->too_large) {
        err_set(e, ERR_INVALID_DATA, "%s %s: the body is larger than %zu bytes", method, name, s->limit);
        return FAIL;
    }
    if (s->write_failed) {
        err_set(e, s->file ? ERR_IO : ERR_NOMEM, "%s %s: %s", method, name,
                s->file ? "writing the download failed" : "out of memory");
        return FAIL;
    }
    if (cc != CURLE_OK) {
        err_set(e, ERR_DATA_UNAVAILABLE, "%s %s: %s", method, name, errbuf[0] ? errbuf : curl_easy_strerror(cc));
        return curl_code_retryable(cc) ? RETRY : FAIL;
    }
    long st = 0;
    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &st);
    s->status = st;
    if (st == 401 || st == 403) {
        err_set(e, ERR_AUTH, "%s %s: HTTP %ld (auth_failed)", method, name, st);
        return FAIL;
    }
    if (st < 200 || st >= 300) {
        err_set(e, ERR_DATA_UNAVAILABLE, "%s %s: HTTP %ld%s", method, name, st, st == 404 ? " (not found)" : "");
        return status_retryable(st) ? RETRY : FAIL;
    }
    if (s->head) {
        s->received = clen > 0 ? (uint64_t)clen : 0;
        return DONE;
    }
    /* curl reports a short body as CURLE_PARTIAL_FILE; check again so nothing short slips through. */
    if (clen >= 0 && (uint64_t)clen != s->received) {
        err_set(e, ERR_DATA_UNAVAILABLE, "%s %s: truncated body: %llu of %lld bytes", method, name,
                (unsigned long long)s->received, (long long)clen);
        return RETRY;
    }
    return DONE;
}

static uint64_t next_random(struct http_client *c)
{
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    return c->rng;
}

/* Full jitter (uniform in [0, min(cap, base * 2^(n-1))]), slept in short steps so cancel is seen. */
static int backoff(struct http_client *c, int n, struct err *e)
{
    long ceiling = c->opt.backoff_base_ms;
    for (int i = 1; i < n && ceiling < c->opt.backoff_cap_ms; i++)
        ceiling *= 2;
    if (ceiling > c->opt.backoff_cap_ms)
        ceiling = c->opt.backoff_cap_ms;
    long ms = ceiling > 0 ? (long)(next_random(c) % (uint64_t)(ceiling + 1)) : 0;
    while (ms > 0) {
        if (c->opt.cancel && atomic_load(c->opt.cancel))
            return err_set(e, ERR_CANCELLED, "cancelled");
        long step = ms < 50 ? ms : 50;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = step * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        ms -= step;
    }
    return ERR_OK;
}

/* Starts an attempt afresh: an empty body, and for files an emptied temp file. */
static int sink_rewind(struct sink *s, const char *name, struct err *e)
{
    s->len = 0;
    if (s->buf)
        s->buf[0] = '\0';
    s->received = 0;
    s->status = 0;
    s->http_error = false;
    s->etag[0] = '\0';
    if (s->file) {
        if (fflush(s->file) != 0 || ftruncate(fileno(s->file), 0) != 0 || fseeko(s->file, 0, SEEK_SET) != 0)
            return err_set(e, ERR_IO, "GET %s: rewinding the temp file: %s", name, strerror(errno));
    }
    return ERR_OK;
}

static int get(struct http_client *c, const struct http_request *rq, struct sink *s, struct http_result *r,
               struct err *caller_e)
{
    struct err local;
    struct err *e = caller_e ? caller_e : &local;
    char name[512];
    if (rq->display)
        snprintf(name, sizeof name, "%s", rq->display);
    else
        http_url_redact(rq->url, name, sizeof name);
    memset(r, 0, sizeof *r);
    const char *method = s->head ? "HEAD" : "GET";
    if (strncmp(rq->url, "http://", 7) != 0 && strncmp(rq->url, "https://", 8) != 0)
        return err_set(e, ERR_INVALID_ARG, "%s %s: only http:// and https:// are fetched", method, name);

    int rc = ERR_INTERNAL;
    for (int n = 1; n <= c->opt.max_attempts; n++) {
        if (n > 1 && (rc = backoff(c, n - 1, e)) != ERR_OK)
            break;
        if ((rc = sink_rewind(s, name, e)) != ERR_OK)
            break;
        enum outcome o = attempt(c, rq, s, name, e);
        if (o == DONE) {
            rc = ERR_OK;
            break;
        }
        rc = e->code;
        if (o == FAIL)
            break;
        if (n == c->opt.max_attempts && n > 1)
            err_prefix(e, "after %d attempts", n);
    }
    r->status = s->status;
    r->size = s->received;
    memcpy(r->etag, s->etag, sizeof r->etag);
    r->body = s->buf;
    r->body_len = s->len;
    s->buf = NULL;
    if (rc == ERR_OK && !r->body) {
        r->body = calloc(1, 1);   /* an empty body is still a string */
        if (!r->body)
            return err_set(e, ERR_NOMEM, "GET %s: out of memory", name);
    }
    return rc;
}

int http_get_mem(struct http_client *c, const struct http_request *rq, struct http_result *r, struct err *e)
{
    return http_get_mem_max(c, rq, SIZE_MAX, r, e);
}

int http_get_mem_max(struct http_client *c, const struct http_request *rq, size_t max, struct http_result *r,
                     struct err *e)
{
    struct sink s = {.limit = max};
    return get(c, rq, &s, r, e);
}

int http_head(struct http_client *c, const struct http_request *rq, struct http_result *r, struct err *e)
{
    struct sink s = {.limit = SIZE_MAX, .head = true};
    return get(c, rq, &s, r, e);
}

int http_get_file(struct http_client *c, const struct http_request *rq, const char *path,
                  struct http_result *r, struct err *e)
{
    memset(r, 0, sizeof *r);
    size_t plen = strlen(path);
    char *tmp = malloc(plen + sizeof ".part.XXXXXX");
    if (!tmp)
        return err_set(e, ERR_NOMEM, "out of memory");
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".part.XXXXXX", sizeof ".part.XXXXXX");
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int rc = err_set(e, ERR_IO, "creating %s: %s", tmp, strerror(errno));
        free(tmp);
        return rc;
    }
    FILE *f = fdopen(fd, "w+b");
    if (!f) {
        int rc = err_set(e, ERR_IO, "fdopen %s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        free(tmp);
        return rc;
    }
    struct sink s = {.file = f, .limit = 0};
    int rc = get(c, rq, &s, r, e);
    if (fflush(f) != 0 && rc == ERR_OK)
        rc = err_set(e, ERR_IO, "writing %s: %s", tmp, strerror(errno));
    if (fclose(f) != 0 && rc == ERR_OK)
        rc = err_set(e, ERR_IO, "closing %s: %s", tmp, strerror(errno));
    if (rc == ERR_OK && rename(tmp, path) != 0)
        rc = err_set(e, ERR_IO, "renaming %s to %s: %s", tmp, path, strerror(errno));
    if (rc != ERR_OK)
        unlink(tmp);
    free(tmp);
    return rc;
}
