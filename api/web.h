/* web.h — the dashboard's files (web/), embedded at build time by scripts/embed-web, and how they are served. */
#ifndef TRAIND_API_WEB_H
#define TRAIND_API_WEB_H

#include <stdbool.h>
#include <stddef.h>

struct api_web_file {
    const char *name;                 /* basename: served at /static/NAME (index.html also at /) */
    const char *type;                 /* Content-Type */
    const unsigned char *data;
    size_t len;
    const unsigned char *gz;          /* the same bytes gzip-compressed */
    size_t gz_len;
    const char *etag;                 /* strong, quoted: of data ... */
    const char *gz_etag;              /* ... and of gz */
};

extern const struct api_web_file api_web_files[];
extern const size_t api_web_nfiles;

/* The policy every dashboard file is sent with: its own files and this daemon's API, nothing inline. */
#define API_WEB_CSP                                                                                 \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "              \
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

/* The file a GET of path serves ("/" or "/static/NAME"), or NULL. */
const struct api_web_file *api_web_find(const char *path);
/* Whether an Accept-Encoding header (NULL: absent) accepts gzip (named, or "*", with q > 0). */
bool api_web_accepts_gzip(const char *accept_encoding);
/* Whether an If-None-Match header (NULL: absent) names etag, or is "*" (weak comparison, RFC 9110 13.1.2). */
bool api_web_etag_matches(const char *if_none_match, const char *etag);

struct MHD_Connection;
/*
 * Queues f on c as it is in the binary: 304 when If-None-Match names its ETag, gzip when
 * Accept-Encoding takes it, with the dashboard's headers (CSP, no-cache, Vary). *status: the
 * status queued. The return is libmicrohttpd's enum MHD_Result.
 */
int api_web_send(struct MHD_Connection *c, const struct api_web_file *f, unsigned *status);

#endif
