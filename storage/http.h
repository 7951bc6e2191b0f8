/* http.h — GETs over libcurl with timeouts, bounded redirects and retries with full-jitter backoff. */
#ifndef TRAIND_STORAGE_HTTP_H
#define TRAIND_STORAGE_HTTP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/*
 * How patient a client is. Zero fields of a memset struct are not defaults:
 * start from http_options_default and change what you need (tests shrink the
 * backoff and the stall limit so they stay fast).
 */
struct http_options {
    long connect_timeout_ms;   /* TCP + TLS handshake */
    long stall_timeout_s;      /* fail when under stall_min_bps for this long (>= 1); curl measures
                                  the rate over up to 5 s, so a stall is seen within this + 5 s */
    long stall_min_bps;
    long total_timeout_ms;     /* whole attempt; 0 = none (large partitions take what they take) */
    int max_attempts;          /* attempts in all, first one included */
    long backoff_base_ms;      /* full jitter: sleep uniform in [0, min(cap, base * 2^(attempt-1))] */
    long backoff_cap_ms;
    long max_redirects;
    const char *connect_to;    /* "HOST:PORT:CONNECT-TO-HOST:PORT" as curl's --connect-to, or NULL */
    const atomic_bool *cancel; /* when set and true, transfers and backoff stop with ERR_CANCELLED */
};

void http_options_default(struct http_options *o);

/* One client per thread: it owns a curl easy handle (reused, so connections are kept alive). */
struct http_client;

int http_client_new(const struct http_options *o, struct http_client **out, struct err *e);
void http_client_free(struct http_client *c);

/* Attempts made by the client since it was created (retries included). */
uint64_t http_client_attempts(const struct http_client *c);

struct http_request {
    const char *url;               /* http:// or https:// only; the query already encoded */
    const char *const *headers;    /* "Name: value" lines, or NULL */
    size_t n_headers;
    const char *aws_sigv4;         /* CURLOPT_AWS_SIGV4 provider ("aws:amz:REGION:SERVICE"), or NULL */
    const char *user;              /* access key (SigV4) or basic-auth user, or NULL */
    const char *password;          /* secret key or basic-auth password; never in a message */
    const char *display;           /* what messages call the object (e.g. "s3://b/k"); NULL = url without userinfo/query */
};

struct http_result {
    long status;           /* last HTTP status, 0 when none arrived */
    uint64_t size;         /* body bytes received by the successful attempt */
    char etag[128];        /* ETag response header as sent (quotes kept), "" when none */
    char *body;            /* http_get_mem: the body, NUL-terminated; on an HTTP error: its first bytes */
    size_t body_len;
};

void http_result_free(struct http_result *r);

/*
 * GET into memory (listings, XML). Retries network errors, truncated bodies,
 * 429 and 500/502/503/504; never 401/403 (ERR_AUTH) or 404 (ERR_DATA_UNAVAILABLE).
 * Other 4xx fail at once with ERR_DATA_UNAVAILABLE. On any HTTP error the status
 * and the start of the error body are left in *r (callers such as S3 read its
 * error code), so free *r whatever the return.
 */
int http_get_mem(struct http_client *c, const struct http_request *rq, struct http_result *r, struct err *e);
/* The same, but a body longer than max bytes stops the transfer: ERR_INVALID_DATA, not retried. */
int http_get_mem_max(struct http_client *c, const struct http_request *rq, size_t max, struct http_result *r,
                     struct err *e);

/*
 * GET into the file path: written under a temp name beside it, checked (status,
 * Content-Length against bytes received), then renamed into place, so path
 * either does not exist or holds the whole object. Same retries as http_get_mem.
 */
int http_get_file(struct http_client *c, const struct http_request *rq, const char *path,
                  struct http_result *r, struct err *e);

/* HEAD: status, ETag and r->size = Content-Length (0 when absent); same retries and errors as GET. */
int http_head(struct http_client *c, const struct http_request *rq, struct http_result *r, struct err *e);

/*
 * One response header line as curl hands it over (len bytes, no NUL): a status line "HTTP/..."
 * gives its three-digit code in *status (0 when it has none) and returns 1; "ETag: v" copies v,
 * trimmed and cut to etag_size - 1 bytes, into etag and returns 2; any other line returns 0.
 */
int http_header_parse(const char *p, size_t len, long *status, char *etag, size_t etag_size);

/* Writes url without "user:pass@" and without the query into buf (messages never carry secrets). */
void http_url_redact(const char *url, char *buf, size_t size);

#endif
