/* store_s3.c — s3://bucket/prefix/glob as a store: ListObjectsV2 for store_list, GetObject for store_map. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3.h"
#include "store.h"
#include "store_remote.h"

int store_s3_client(const struct store_url *u, struct s3_client **c, struct err *e)
{
    const struct store_remote *r = u->remote;
    struct s3_config cfg = {0};
    if (r) {
        cfg.endpoint = r->s3_endpoint;
        cfg.region = r->s3_region;
        cfg.anonymous = r->s3_anonymous;
    }
    struct store_list_limits lim = store_remote_list_limits(u);
    cfg.list_max_bytes = lim.max_bytes;
    cfg.list_max_keys = lim.max_keys;
    struct http_options o;
    store_remote_http_options(u, &o);
    return s3_client_new(&cfg, &o, c, e);
}

/* "bucket/a/b" gives bucket "bucket" and dir "a/b/"; "bucket" gives dir "". */
static int split_location(const char *loc, char **bucket, char **dir, struct err *e)
{
    *bucket = *dir = NULL;
    size_t bl = strcspn(loc, "/");
    if (bl == 0 || strcmp(loc, ".") == 0)
        return err_set(e, ERR_INVALID_ARG, "an s3 URL is s3://bucket/key or s3://bucket/prefix/glob");
    *bucket = strndup(loc, bl);
    const char *rest = loc[bl] ? loc + bl + 1 : "";
    if (asprintf(dir, "%s%s", rest, *rest ? "/" : "") < 0)
        *dir = NULL;
    if (!*bucket || !*dir) {
        free(*bucket);
        free(*dir);
        *bucket = *dir = NULL;
        return err_set(e, ERR_NOMEM, "out of memory");
    }
    return ERR_OK;
}

int store_s3_list(const struct store_url *u, struct store_listing *out, struct err *e)
{
    memset(out, 0, sizeof *out);
    char *bucket, *dir;
    int rc = split_location(u->location, &bucket, &dir, e);
    if (rc)
        return rc;
    struct s3_client *c = NULL;
    struct s3_listing l = {0};
    if ((rc = store_s3_client(u, &c, e)) == ERR_OK)
        rc = s3_list(c, bucket, dir, u->pattern, &l, e);
    if (rc == ERR_OK && l.n == 0)
        rc = err_set(e, ERR_DATA_UNAVAILABLE, "no object matches");
    if (rc == ERR_OK && !(out->v = calloc(l.n, sizeof *out->v)))
        rc = err_set(e, ERR_NOMEM, "out of memory");
    size_t dl = strlen(dir);
    for (size_t i = 0; rc == ERR_OK && i < l.n; i++) {
        struct store_object *o = &out->v[out->n++];
        /* Keys are dir + name and the glob never crosses '/', so key order is name order. */
        o->name = strdup(l.v[i].key + dl);
        if (asprintf(&o->path, "s3://%s/%s", bucket, l.v[i].key) < 0)
            o->path = NULL;
        o->etag = strdup(l.v[i].etag);
        o->size = l.v[i].size;
        if (!o->name || !o->path || !o->etag)
            rc = err_set(e, ERR_NOMEM, "out of memory");
    }
    if (rc)
        store_listing_free(out);
    s3_listing_free(&l);
    s3_client_free(c);
    free(bucket);
    free(dir);
    return rc;
}

int store_s3_split(const struct store_object *o, char **bucket, const char **key, struct err *e)
{
    const char *bk = o->path + strlen("s3://");
    const char *slash = strchr(bk, '/');
    if (strncmp(o->path, "s3://", 5) != 0 || !slash)
        return err_set(e, ERR_INTERNAL, "not an s3 object: %s", o->path);
    if (!(*bucket = strndup(bk, (size_t)(slash - bk))))
        return err_set(e, ERR_NOMEM, "out of memory");
    *key = slash + 1;
    return ERR_OK;
}

static int fetch(void *arg, const struct store_url *u, const struct store_object *o, const char *path,
                 struct err *e)
{
    (void)arg;
    char *bucket;
    const char *key;
    int rc = store_s3_split(o, &bucket, &key, e);
    if (rc)
        return rc;
    struct s3_client *c;
    if ((rc = store_s3_client(u, &c, e)) == ERR_OK) {
        struct http_result r;
        rc = s3_get_file(c, bucket, key, path, &r, e);
        http_result_free(&r);
        s3_client_free(c);
    }
    free(bucket);
    return rc;
}

int store_s3_map(const struct store_url *u, const struct store_object *o, struct store_blob *b, struct err *e)
{
    return store_remote_map(u, o, fetch, NULL, b, e);
}
