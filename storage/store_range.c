/* store_range.c — parts of one object: pread for file://, ranged GETs for s3:// and http(s):// (store.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http.h"
#include "s3.h"
#include "store.h"
#include "store_remote.h"

struct store_reader {
    const struct store_url *u;
    const struct store_object *o;
    uint64_t size;                /* 0 until known */
    uint64_t fetched;
    int fd;                       /* file:// */
    struct s3_client *s3;
    char *bucket;
    const char *key;              /* inside o->path */
    struct http_client *http;
    struct store_blob whole;      /* a server that ignores ranges: the object, read once */
    bool have_whole;
};

int store_reader_open(const struct store_url *u, const struct store_object *o, struct store_reader **out,
                      struct err *e)
{
    *out = NULL;
    struct store_reader *r = calloc(1, sizeof *r);
    if (!r)
        return err_set(e, ERR_NOMEM, "out of memory");
    *r = (struct store_reader){.u = u, .o = o, .size = o->size, .fd = -1};
    int rc;
    if (u->scheme == STORE_SCHEME_FILE) {
        struct stat st;
        if ((rc = store_file_open(o, &r->fd, e)) == ERR_OK && fstat(r->fd, &st) == 0)
            r->size = (uint64_t)st.st_size;
    } else if (u->scheme == STORE_SCHEME_S3) {
        if ((rc = store_s3_split(o, &r->bucket, &r->key, e)) == ERR_OK)
            rc = store_s3_client(u, &r->s3, e);
    } else {
        struct http_options ho;
        store_remote_http_options(u, &ho);
        rc = http_client_new(&ho, &r->http, e);
    }
    if (rc) {
        store_reader_close(r);
        return rc;
    }
    *out = r;
    return ERR_OK;
}

void store_reader_close(struct store_reader *r)
{
    if (!r)
        return;
    if (r->fd >= 0)
        close(r->fd);
    s3_client_free(r->s3);
    http_client_free(r->http);
    free(r->bucket);
    if (r->have_whole)
        store_unmap(&r->whole);
    free(r);
}

uint64_t store_reader_fetched(const struct store_reader *r)
{
    return r->fetched;
}

bool store_reader_whole(const struct store_reader *r)
{
    return r->have_whole;
}

int store_reader_size(struct store_reader *r, uint64_t *size, struct err *e)
{
    if (!r->size && r->http) {
        struct http_request rq = {.url = r->o->path};
        struct http_result res;
        int rc = http_head(r->http, &rq, &res, e);
        r->size = rc == ERR_OK ? res.size : 0;
        http_result_free(&res);
        if (rc)
            return rc;
    }
    *size = r->size; /* 0: empty, or a server that does not say (then reads find out) */
    return ERR_OK;
}

int store_reader_read_cb(void *reader, uint64_t off, size_t len, void *dst, struct err *e)
{
    return store_reader_read(reader, off, len, dst, e);
}

static int read_file(struct store_reader *r, uint64_t off, size_t len, char *dst, struct err *e)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = pread(r->fd, dst + got, len - got, (off_t)(off + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return err_set(e, ERR_IO, "%s: %s", r->o->path, strerror(errno));
        if (n == 0)
            return err_set(e, ERR_INVALID_DATA, "%s: ends at byte %llu, before the %zu bytes at %llu it should hold "
                           "(did it change?)", r->o->path, (unsigned long long)(off + got), len,
                           (unsigned long long)off);
        got += (size_t)n;
    }
    r->fetched += len;
    return ERR_OK;
}

/* The ranged GET itself; *whole set when the server answered with the object instead (200). */
static int get_range(struct store_reader *r, uint64_t off, size_t len, struct http_result *res, bool *whole,
                     struct err *e)
{
    int rc;
    if (r->s3) {
        rc = s3_get_range(r->s3, r->bucket, r->key, off, len, res, e);
    } else {
        char range[80];
        snprintf(range, sizeof range, "Range: bytes=%llu-%llu", (unsigned long long)off,
                 (unsigned long long)(off + len - 1));
        const char *headers[] = {range};
        struct http_request rq = {.url = r->o->path, .headers = headers, .n_headers = 1};
        rc = http_get_mem_max(r->http, &rq, len, res, e);
    }
    /* 200 is the whole object: what we asked for only when that is the object (else it overflowed len). */
    *whole = res->status == 200 && !(rc == ERR_OK && off == 0 && res->body_len == len);
    if (rc == ERR_OK && !*whole && res->body_len != len)
        rc = err_set(e, ERR_DATA_UNAVAILABLE, "%s: %zu bytes at %llu asked, %zu sent (did it change?)", r->o->path,
                     len, (unsigned long long)off, res->body_len);
    return rc;
}

int store_reader_read(struct store_reader *r, uint64_t off, size_t len, void *dst, struct err *e)
{
    if (len == 0)
        return ERR_OK;
    if (off > UINT64_MAX - len || (r->size && off + len > r->size))
        return err_set(e, ERR_INVALID_DATA, "%s: %zu bytes at %llu lie past its end (%llu bytes)", r->o->path, len,
                       (unsigned long long)off, (unsigned long long)r->size);
    if (r->fd >= 0)
        return read_file(r, off, len, dst, e);
    if (!r->have_whole) {
        struct http_result res;
        bool whole;
        int rc = get_range(r, off, len, &res, &whole, e);
        if (rc == ERR_OK && !whole) {
            memcpy(dst, res.body, len);
            r->fetched += len;
        }
        http_result_free(&res);
        if (!whole)
            return rc;
        /* No ranges here: read it whole once (through the download cache, as store_map does). */
        if ((rc = store_map(r->u, r->o, &r->whole, e)) != ERR_OK)
            return rc;
        r->have_whole = true;
        r->fetched += r->whole.len;
    }
    if (off > r->whole.len || len > r->whole.len - off)
        return err_set(e, ERR_INVALID_DATA, "%s: %zu bytes at %llu lie past its end (%zu bytes)", r->o->path, len,
                       (unsigned long long)off, r->whole.len);
    memcpy(dst, r->whole.data + off, len);
    return ERR_OK;
}
