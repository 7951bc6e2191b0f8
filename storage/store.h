/* store.h — object stores behind one small interface: parse a URL, list objects matching its glob, read one. */
#ifndef TRAIND_STORAGE_STORE_H
#define TRAIND_STORAGE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "http.h"

enum store_scheme { STORE_SCHEME_FILE, STORE_SCHEME_S3, STORE_SCHEME_HTTP };

/*
 * How s3:// and http(s):// are reached. NULL fields: the environment (AWS_ENDPOINT_URL,
 * AWS_DEFAULT_REGION, AWS_ACCESS_KEY_ID...) or the defaults of http_options_default.
 */
/*
 * The most one listing may bring, an http(s) .list file or an S3 ListObjectsV2 walk of every
 * page: bytes received and objects named. Past either, store_list fails with ERR_INVALID_DATA
 * naming the URL and the limit.
 */
#define STORE_LIST_MAX_BYTES ((uint64_t)64 << 20)
#define STORE_LIST_MAX_KEYS ((uint64_t)1000000)
struct store_list_limits {
    uint64_t max_bytes;               /* 0: STORE_LIST_MAX_BYTES */
    uint64_t max_keys;                /* 0: STORE_LIST_MAX_KEYS */
};

struct store_remote {
    const char *s3_endpoint;          /* custom endpoint, addressed path-style */
    const char *s3_region;
    bool s3_anonymous;                /* unsigned requests (public buckets) */
    const char *cache_dir;            /* downloads kept as <sha256(url, etag, size)>-<name>; NULL: a temp
                                         file per map, unlinked once mapped. Datasets keep parsed
                                         partitions in its parsed/ folder (pcache.h) */
    uint64_t cache_limit;             /* bytes the cache dir may hold; least recently used files go
                                         first (0 = no limit). An evicted download stays readable for
                                         whoever has it mapped: the kernel keeps it until unmapped; a
                                         parsed file in use is not evicted at all. */
    const struct http_options *http;  /* timeouts and retries */
    struct store_list_limits list;
};

/*
 * A URL split into where to list and what to match: "file:///d/part*.csv",
 * "/d/part*.csv" and "d/part*.csv" all give location "/d" or "d" and pattern
 * "part*.csv". Only the last path component is a glob; the location is literal.
 */
struct store_url {
    enum store_scheme scheme;
    char *location;   /* file: directory; s3: "bucket/prefix"; http: the URL without the last component */
    char *pattern;    /* fnmatch pattern for the last component ("*" when the URL ends in '/') */
    struct store_remote *remote;  /* owned copy set by store_url_set_remote; NULL = environment */
};

int store_url_parse(const char *url, struct store_url *u, struct err *e);
void store_url_free(struct store_url *u);

/* Copies r (deeply) into u for store_list and store_map of remote schemes; r may be NULL. */
int store_url_set_remote(struct store_url *u, const struct store_remote *r, struct err *e);
void store_remote_free(struct store_remote *r);

/* One listed object. name is the last component (what shards metadata and sorting use). */
struct store_object {
    char *name;
    char *path;       /* file: the resolved absolute path; later: the object's full URL */
    uint64_t size;    /* 0 when a remote store does not say (http) */
    char *etag;       /* remote: the ETag from the listing, or NULL */
    char *root;       /* file: the resolved data root it was listed under, which a read may not leave; NULL
                         when reads are not confined */
    bool exact_size;  /* file: size is what a read must find, else the file changed under us */
};

struct store_listing {
    struct store_object *v;
    size_t n;
};

/* True when resolved path p is root itself or below it (component-wise, so /data2 is not below /data). */
bool store_path_below(const char *p, const char *root);

/* Where reads are allowed: file reads must resolve below one of the roots (NULL = anywhere). */
struct store_access {
    const char *const *data_roots;
    size_t n_data_roots;
    const struct store_remote *remote; /* for stores a URL opens itself (shards metadata); may be NULL */
};

/*
 * Lists the objects whose last component matches u->pattern, sorted by name
 * (bytewise). ERR_DATA_UNAVAILABLE when nothing matches, ERR_AUTH when a file
 * resolves outside the data roots or a missing location's nearest existing folder
 * does (one message for both: it says nothing of what exists outside the roots),
 * ERR_INVALID_ARG for a scheme not supported yet.
 * Messages do not repeat the URL: the caller prefixes it (err_prefix).
 */
int store_list(const struct store_url *u, const struct store_access *acc, struct store_listing *out,
               struct err *e);
void store_listing_free(struct store_listing *l);
void store_object_free(struct store_object *o); /* its strings; the struct is the caller's */

/*
 * The bytes of one object, read-only; len may be 0. Close with store_unmap. They are a
 * copy the daemon owns, read with pread, never a mapping of the file: a file truncated
 * under a mapping raises SIGBUS on the next read of a lost page, which kills the process.
 */
struct store_blob {
    const char *data;
    size_t len;
    void *own;        /* what to free; NULL when len == 0 */
};

int store_map(const struct store_url *u, const struct store_object *o, struct store_blob *b, struct err *e);
void store_unmap(struct store_blob *b);

/*
 * The file:// implementation; s3:// and http(s):// are siblings (store_s3.c, store_http.c)
 * whose map downloads (store_remote.c) and then maps the local file like file:// does.
 * An http(s) URL names one object, or a listing when its last component ends in ".list":
 * a text file of object URLs, one a line, absolute or relative to the listing ('#' comments).
 */
int store_file_list(const struct store_url *u, const struct store_access *acc, struct store_listing *out,
                    struct err *e);
/* Reads o: below o->root when set (a path that now leads out of it reads as gone: ERR_DATA_UNAVAILABLE);
   ERR_INVALID_DATA when its size is not the listed one or changes while it is read. */
int store_file_map(const struct store_object *o, struct store_blob *b, struct err *e);
/* Opens o for reading as store_file_map does (the same errors), without reading it. */
int store_file_open(const struct store_object *o, int *fd, struct err *e);
void store_file_unmap(struct store_blob *b);

/* Reads the regular file open as fd whole into b (close with store_unmap); ERR_INVALID_DATA when it
   changes size while it is read. name is for messages. */
int store_read_fd(int fd, const char *name, struct store_blob *b, struct err *e);

/*
 * Parts of one object (Parquet's footer and column chunks): file:// by pread below its root,
 * s3:// and http(s):// by ranged GETs on one client (its connection kept alive). A server that
 * answers a range with the whole object (200) is read whole once, through the download cache as
 * store_map reads, and every range served from that copy. Not thread-safe: a reader a thread.
 */
struct store_reader;
int store_reader_open(const struct store_url *u, const struct store_object *o, struct store_reader **out,
                      struct err *e);
/* The object's size: the listing's, else the file's or a HEAD's (0 when a server does not say). */
int store_reader_size(struct store_reader *r, uint64_t *size, struct err *e);
/* Exactly len bytes at off into dst; fewer there is ERR_INVALID_DATA (the object changed). */
int store_reader_read(struct store_reader *r, uint64_t off, size_t len, void *dst, struct err *e);
/* The same for a callback that takes the reader as a void * (parquet.h's parquet_read_fn). */
int store_reader_read_cb(void *reader, uint64_t off, size_t len, void *dst, struct err *e);
/* Bytes brought from the store so far: the ranges read, or the whole object once it was read whole. */
uint64_t store_reader_fetched(const struct store_reader *r);
/* Whether the server answered a range with the whole object, so that ranges are no use there. */
bool store_reader_whole(const struct store_reader *r);
void store_reader_close(struct store_reader *r);

int store_s3_list(const struct store_url *u, struct store_listing *out, struct err *e);
int store_s3_map(const struct store_url *u, const struct store_object *o, struct store_blob *b, struct err *e);
int store_http_list(const struct store_url *u, struct store_listing *out, struct err *e);
int store_http_map(const struct store_url *u, const struct store_object *o, struct store_blob *b,
                   struct err *e);
/* The objects of a .list file's text (body, NUL-terminated, cut up in place) read from url, sorted by
   name; more than max_keys of them is ERR_INVALID_DATA. */
int store_http_parse_listing(const char *url, char *body, uint64_t max_keys, struct store_listing *out,
                             struct err *e);

#endif
