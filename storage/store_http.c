/*
 * store_http.c — http(s):// as a store. There is no listing in HTTP, so a URL names
 * one object, or a listing file when its path ends in ".list": object URLs one a line,
 * absolute or relative to the listing, blank lines and '#' comments ignored.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "store.h"
#include "store_remote.h"

static bool is_listing(const char *url)
{
    size_t n = strcspn(url, "?#");
    return n >= 5 && memcmp(url + n - 5, ".list", 5) == 0;
}

/* The last path component, without query or fragment. */
static char *name_of(const char *url)
{
    size_t end = strcspn(url, "?#");
    size_t start = end;
    while (start > 0 && url[start - 1] != '/')
        start--;
    return strndup(url + start, end - start);
}

static int add(struct store_listing *l, size_t *cap, const char *url, struct err *e)
{
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return err_set(e, ERR_INVALID_ARG, "not an http(s) URL in the listing");
    const char *host = strstr(url, "://") + 3;
    if (memchr(host, '@', strcspn(host, "/?#")))
        return err_set(e, ERR_INVALID_ARG, "credentials in http URLs are not supported (they would show in messages)");
    if (l->n == *cap) {
        size_t nc = *cap ? 2 * *cap : 16;
        struct store_object *v = realloc(l->v, nc * sizeof *v);
        if (!v)
            return err_set(e, ERR_NOMEM, "out of memory");
        l->v = v;
        *cap = nc;
    }
    struct store_object *o = &l->v[l->n];
    memset(o, 0, sizeof *o);
    o->path = strdup(url);
    o->name = name_of(url);
    if (!o->path || !o->name) {
        free(o->path);
        free(o->name);
        return err_set(e, ERR_NOMEM, "out of memory");
    }
    if (!o->name[0]) {
        free(o->path);
        free(o->name);
        return err_set(e, ERR_INVALID_ARG, "an http(s) object URL must end in a file name");
    }
    l->n++;
    return ERR_OK;
}

/* line resolved against the listing's URL: absolute, host-absolute ("/x") or relative ("x", "d/x"). */
static char *resolve(const char *listing, const char *line)
{
    char *out = NULL;
    int n = -1;
    if (strncmp(line, "http://", 7) == 0 || strncmp(line, "https://", 8) == 0) {
        out = strdup(line);
        return out;
    }
    const char *host = strstr(listing, "://") + 3;
    size_t origin = (size_t)(host - listing) + strcspn(host, "/?#");
    if (line[0] == '/') {
        n = asprintf(&out, "%.*s%s", (int)origin, listing, line);
    } else {
        size_t path_end = strcspn(listing, "?#");
        size_t dir = path_end;
        while (dir > origin && listing[dir - 1] != '/')
            dir--;
        n = dir > origin ? asprintf(&out, "%.*s%s", (int)dir, listing, line)
                         : asprintf(&out, "%.*s/%s", (int)origin, listing, line);
    }
    return n < 0 ? NULL : out;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const struct store_object *)a)->name, ((const struct store_object *)b)->name);
}

int store_http_parse_listing(const char *url, char *body, uint64_t max_keys, struct store_listing *out,
                             struct err *e)
{
    memset(out, 0, sizeof *out);
    char name[512];
    http_url_redact(url, name, sizeof name);
    size_t cap = 0;
    int rc = ERR_OK;
    for (char *save = NULL, *line = strtok_r(body, "\n", &save); line && rc == ERR_OK;
         line = strtok_r(NULL, "\n", &save)) {
        while (*line == ' ' || *line == '\t')
            line++;
        size_t n = strlen(line);
        while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
            line[--n] = '\0';
        if (n == 0 || line[0] == '#')
            continue;
        if (out->n == max_keys) {
            rc = err_set(e, ERR_INVALID_DATA, "%s: the listing names more than %llu objects (--list-max-keys)",
                         name, (unsigned long long)max_keys);
            break;
        }
        char *abs = resolve(url, line);
        rc = abs ? add(out, &cap, abs, e) : err_set(e, ERR_NOMEM, "out of memory");
        free(abs);
    }
    if (rc == ERR_OK && out->n == 0)
        rc = err_set(e, ERR_DATA_UNAVAILABLE, "the listing names no object");
    if (rc)
        store_listing_free(out);
    else
        qsort(out->v, out->n, sizeof *out->v, cmp_name);
    return rc;
}

/* A client with u's timeouts and retries. */
static int client_for(const struct store_url *u, struct http_client **c, struct err *e)
{
    struct http_options o;
    store_remote_http_options(u, &o);
    return http_client_new(&o, c, e);
}

static int list_file(const struct store_url *u, const char *url, struct store_listing *out, struct err *e)
{
    struct http_client *c;
    int rc = client_for(u, &c, e);
    if (rc)
        return rc;
    struct store_list_limits lim = store_remote_list_limits(u);
    struct http_request rq = {.url = url};
    struct http_result r;
    rc = http_get_mem_max(c, &rq, lim.max_bytes < SIZE_MAX ? (size_t)lim.max_bytes : SIZE_MAX, &r, e);
    http_client_free(c);
    if (rc == ERR_INVALID_DATA) {
        char name[512];
        http_url_redact(url, name, sizeof name);
        err_set(e, ERR_INVALID_DATA, "%s: the listing is larger than %llu bytes (--list-max-bytes)", name,
                (unsigned long long)lim.max_bytes);
    }
    if (rc == ERR_OK)
        rc = store_http_parse_listing(url, r.body, lim.max_keys, out, e);
    http_result_free(&r);
    return rc;
}

int store_http_list(const struct store_url *u, struct store_listing *out, struct err *e)
{
    memset(out, 0, sizeof *out);
    /* url.c split the URL at its last '/': put it back together (HTTP has no globs). */
    char *url;
    if (asprintf(&url, "%s/%s", u->location, u->pattern) < 0)
        return err_set(e, ERR_NOMEM, "out of memory");
    const char *host = strstr(url, "://");
    int rc;
    if (!host || !strchr(host + 3, '/'))
        rc = err_set(e, ERR_INVALID_ARG, "an http(s) URL must name an object or a .list file");
    else if (is_listing(url))
        rc = list_file(u, url, out, e);
    else {
        size_t cap = 0;
        rc = add(out, &cap, url, e);
        if (rc)
            store_listing_free(out);
    }
    free(url);
    return rc;
}

static int fetch(void *arg, const struct store_url *u, const struct store_object *o, const char *path,
                 struct err *e)
{
    struct http_client *c;
    int rc = client_for(u, &c, e);
    if (rc)
        return rc;
    struct http_request rq = {.url = o->path};
    struct http_result r;
    rc = http_get_file(c, &rq, path, &r, e);
    http_result_free(&r);
    http_client_free(c);
    return rc;
}

/*
 * With a cache dir, a HEAD names the version (ETag, size) so that a cached copy
 * is served without reading the body again; without one, it is a plain GET.
 */
int store_http_map(const struct store_url *u, const struct store_object *o, struct store_blob *b,
                   struct err *e)
{
    if (!u->remote || !u->remote->cache_dir)
        return store_remote_map(u, o, fetch, NULL, b, e);
    struct http_client *c;
    int rc = client_for(u, &c, e);
    if (rc)
        return rc;
    struct http_request rq = {.url = o->path};
    struct http_result r;
    rc = http_head(c, &rq, &r, e);
    http_client_free(c);
    if (rc == ERR_OK) {
        struct store_object v = *o;
        v.etag = r.etag;
        v.size = r.size;
        rc = store_remote_map(u, &v, fetch, NULL, b, e);
    }
    http_result_free(&r);
    return rc;
}
