/* store.c — dispatching list and map to the object store a URL names. */
#include "store.h"

#include <stdlib.h>
#include <string.h>

int store_list(const struct store_url *u, const struct store_access *acc, struct store_listing *out,
               struct err *e)
{
    memset(out, 0, sizeof *out);
    switch (u->scheme) {
    case STORE_SCHEME_FILE: return store_file_list(u, acc, out, e);
    case STORE_SCHEME_S3: return store_s3_list(u, out, e);
    case STORE_SCHEME_HTTP: return store_http_list(u, out, e);
    default: return err_set(e, ERR_INTERNAL, "unknown URL scheme %d", (int)u->scheme);
    }
}

void store_object_free(struct store_object *o)
{
    free(o->name);
    free(o->path);
    free(o->etag);
    free(o->root);
}

void store_listing_free(struct store_listing *l)
{
    for (size_t i = 0; i < l->n; i++)
        store_object_free(&l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

int store_map(const struct store_url *u, const struct store_object *o, struct store_blob *b, struct err *e)
{
    memset(b, 0, sizeof *b);
    switch (u->scheme) {
    case STORE_SCHEME_FILE: return store_file_map(o, b, e);
    case STORE_SCHEME_S3: return store_s3_map(u, o, b, e);
    case STORE_SCHEME_HTTP: return store_http_map(u, o, b, e);
    default: return err_set(e, ERR_INTERNAL, "unknown URL scheme %d", (int)u->scheme);
    }
}

void store_unmap(struct store_blob *b)
{
    /* Every store hands out a buffer read from a file (the object, or its cached download). */
    store_file_unmap(b);
}
