/* s3.h — S3 GetObject and ListObjectsV2 over http.h, signed with SigV4 by libcurl. */
#ifndef TRAIND_STORAGE_S3_H
#define TRAIND_STORAGE_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "http.h"

/*
 * Where and as whom. NULL fields come from the environment: endpoint from
 * AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL (else AWS itself), region from
 * AWS_DEFAULT_REGION or AWS_REGION (else us-east-1), credentials from
 * AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN.
 * A custom endpoint ("http://127.0.0.1:9000") is addressed path-style
 * (ENDPOINT/bucket/key); AWS virtual-hosted (https://bucket.s3.REGION.amazonaws.com/key).
 */
struct s3_config {
    const char *endpoint;
    const char *region;
    bool anonymous;            /* no signing (public buckets); credentials are then not read */
    const char *access_key;
    const char *secret_key;
    const char *session_token;
    int max_keys;              /* ListObjectsV2 page size; 0 = 1000 (S3's maximum) */
    uint64_t list_max_bytes;   /* a listing's pages together; past it s3_list fails (ERR_INVALID_DATA) */
    uint64_t list_max_keys;    /* the objects its pages list, matching or not; the same */
    const char *fixed_date;    /* tests only: "YYYYMMDDTHHMMSSZ" sent as X-Amz-Date (curl then sends it twice) */
};

/* One client per thread, like the http_client it owns. */
struct s3_client;

int s3_client_new(const struct s3_config *cfg, const struct http_options *ho, struct s3_client **out,
                  struct err *e);
void s3_client_free(struct s3_client *c);
struct http_client *s3_client_http(struct s3_client *c);

struct s3_object {
    char *key;
    uint64_t size;
    char etag[128];            /* as S3 sends it, quotes included */
};

struct s3_listing {
    struct s3_object *v;
    size_t n;
};

/*
 * Lists keys dir + NAME where NAME matches the fnmatch pattern glob ('*' does not
 * cross '/'), sorted bytewise. ListObjectsV2 is asked for the literal prefix
 * (dir + the part of glob before its first wildcard) and followed across pages.
 * An empty result is not an error here. S3's error Code and Message make the
 * message; AccessDenied and signature/key errors give ERR_AUTH, NoSuchBucket
 * ERR_DATA_UNAVAILABLE.
 */
int s3_list(struct s3_client *c, const char *bucket, const char *dir, const char *glob,
            struct s3_listing *out, struct err *e);
void s3_listing_free(struct s3_listing *l);

/* GetObject into memory (r->body) or into path (temp + rename, see http_get_file). NoSuchKey: ERR_DATA_UNAVAILABLE. */
int s3_get_mem(struct s3_client *c, const char *bucket, const char *key, struct http_result *r, struct err *e);
int s3_get_file(struct s3_client *c, const char *bucket, const char *key, const char *path,
                struct http_result *r, struct err *e);

/*
 * GetObject of bytes [off, off + len) (len > 0) into r->body: a Range request. A server that
 * ignores the range answers 200 with the object from its start; more than len bytes of it stop
 * the transfer (ERR_INVALID_DATA, r->status 200): the caller checks r->status is 206.
 */
int s3_get_range(struct s3_client *c, const char *bucket, const char *key, uint64_t off, size_t len,
                 struct http_result *r, struct err *e);

/* ---- pieces exposed for tests ---- */

/* AWS UriEncode: unreserved A-Z a-z 0-9 - _ . ~ kept, '/' kept when keep_slash, the rest %XX (upper case). malloc'ed. */
char *s3_uri_encode(const char *s, bool keep_slash);

struct s3_param {
    const char *name;
    const char *value;         /* NULL or "" gives "name=" */
};

/*
 * The canonical query string SigV4 wants and curl 7.88 does not build: each name
 * and value UriEncoded, sorted by name then value, joined with '&'. malloc'ed.
 */
char *s3_query_build(const struct s3_param *p, size_t n);

/* The URL of bucket/key (key UriEncoded, '/' kept) with query appended when not NULL. malloc'ed, NULL on OOM. */
char *s3_url(const struct s3_client *c, const char *bucket, const char *key, const char *query);

/*
 * One ListObjectsV2 page (len bytes of xml): appends to out (out->v has *cap slots) the
 * <Contents> whose Key is dir + a name glob matches; *token gets NextContinuationToken,
 * malloc'ed, when the page says it is truncated, else NULL. Each <Contents> takes one of
 * *keys_left: none left is ERR_INVALID_DATA. what names the listing in messages.
 */
int s3_list_parse_page(const char *xml, size_t len, const char *dir, const char *glob, struct s3_listing *out,
                       size_t *cap, uint64_t *keys_left, char **token, const char *what, struct err *e);

/* The length of glob's literal start, the prefix every key it matches begins with. */
size_t s3_glob_literal_len(const char *glob);

/* S3's error document: copies <Code> and <Message> (entities decoded); "" when absent. */
void s3_parse_error(const char *xml, char *code, size_t code_size, char *msg, size_t msg_size);

#endif
