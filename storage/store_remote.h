/* store_remote.h — internal to storage/: the download, cache and map steps s3:// and http(s):// share. */
#ifndef TRAIND_STORAGE_STORE_REMOTE_H
#define TRAIND_STORAGE_STORE_REMOTE_H

#include "http.h"
#include "store.h"

/* The http options of u's remote settings, or the defaults. */
void store_remote_http_options(const struct store_url *u, struct http_options *o);
/* The listing limits of u's remote settings, the defaults where they give none. */
struct store_list_limits store_remote_list_limits(const struct store_url *u);

struct s3_client; /* s3.h */

/* A client for u's s3 settings (store_s3.c); the bucket and key of an s3 object (*key points into o->path). */
int store_s3_client(const struct store_url *u, struct s3_client **c, struct err *e);
int store_s3_split(const struct store_object *o, char **bucket, const char **key, struct err *e);

/*
 * A small file derived from o kept beside its download, named as the download plus suffix
 * (".footer": a Parquet file's footer): only for an object with an ETag and a cache dir, counted
 * in the cache limit like the rest. get: its bytes (free them), or false; put: best effort.
 */
bool store_remote_cache_get(const struct store_url *u, const struct store_object *o, const char *suffix,
                            void **data, size_t *len);
void store_remote_cache_put(const struct store_url *u, const struct store_object *o, const char *suffix,
                            const void *data, size_t len);

/* Downloads object o into path (temp + rename, as http_get_file does). */
typedef int (*store_remote_fetch_fn)(void *arg, const struct store_url *u, const struct store_object *o,
                                     const char *path, struct err *e);

/*
 * Maps o's bytes: from the cache dir when an earlier download of the same URL,
 * ETag and size is there (no request at all), else fetched (into the cache, or a
 * temp file unlinked once mapped) and checked against the listed size.
 */
int store_remote_map(const struct store_url *u, const struct store_object *o, store_remote_fetch_fn fetch,
                     void *arg, struct store_blob *b, struct err *e);

/*
 * Brings dir (downloads) and dir/parsed (parsed partitions, pcache.h) under limit
 * bytes together, least recently used (mtime, which a hit refreshes) first, never
 * keep, temp files, or a parsed file someone holds flock'ed (in use). Evictions of one
 * dir run one at a time, across threads and processes. Best effort: a failure only
 * costs disk space. Returns how many parsed files it removed.
 */
uint64_t store_cache_evict(const char *dir, uint64_t limit, const char *keep);

#endif
