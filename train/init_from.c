/* init_from.c — init {"from": ...}: loading another job's checkpoint file, or fetching a .safetensors URL and loading it. */
#include "init_from.h"

#include <stdio.h>
#include <string.h>

#include "checkpoint.h"
#include "http.h"
#include "spec_compile.h"
#include "store.h"

/* Loads from an open checkpoint file, read into memory of ours: a map would raise SIGBUS if the file
   were truncated during the load. */
static int load_fd(int fd, const char *name, struct nn_model *m, struct err *e)
{
    struct store_blob b;
    int rc = store_read_fd(fd, name, &b, e);
    if (rc == ERR_OK)
        rc = ckpt_load_params_mem(b.data, b.len, name, m, e);
    store_unmap(&b);
    return rc;
}

/* Fetches the one object url names through storage/ (the rules of data URLs), then loads it. */
static int load_url(const struct job_spec *s, const struct init_from_access *acc, struct nn_model *m,
                    struct err *e)
{
    const char *url = s->init_from;
    struct http_options http;
    http_options_default(&http);
    http.cancel = acc->cancel;
    /* The data's S3 settings: a model kept beside the data is reached the same way. */
    struct spec_compiled cs;
    spec_compile(s, &cs);
    struct store_remote remote = cs.remote;
    remote.cache_dir = acc->cache_dir;
    remote.cache_limit = acc->cache_limit;
    remote.http = &http;
    struct store_access sa = {acc->data_roots, acc->n_data_roots, &remote};
    struct store_url u = {0};
    struct store_listing l = {0};
    struct store_blob b = {0};
    int rc = store_url_parse(url, &u, e);
    if (!rc)
        rc = store_url_set_remote(&u, &remote, e);
    if (!rc)
        rc = store_list(&u, &sa, &l, e);
    if (!rc && l.n != 1)
        rc = err_set(e, ERR_INVALID_ARG, "names %zu files; name one .safetensors file", l.n);
    if (!rc)
        rc = store_map(&u, &l.v[0], &b, e);
    /* Named without a query string, which may carry a signature (a presigned URL). */
    char name[512];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(url, "?#"), url);
    if (rc)
        err_prefix(e, "init.from %s", name);
    else
        rc = ckpt_load_params_mem(b.data, b.len, name, m, e);
    store_unmap(&b);
    store_listing_free(&l);
    store_url_free(&u);
    return rc;
}

int init_from_load(const struct job_spec *s, int fd, const struct init_from_access *acc,
                   struct nn_model *m, struct err *e)
{
    if (!s->init_from)
        return 0;
    char name[64];
    snprintf(name, sizeof name, "of job %s", s->init_from);
    int rc = fd >= 0 ? load_fd(fd, name, m, e) : load_url(s, acc, m, e);
    if (rc == ERR_INVALID_DATA)   /* a file that does not fit the model: the spec's mistake (invalid_spec) */
        rc = e->code = ERR_INVALID_ARG;
    return rc;
}
