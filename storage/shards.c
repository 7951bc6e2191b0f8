/* shards.c — loading kaen's shard metadata (header id,count) and joining it to partition names. */
#include "shards.h"

#include <stdlib.h>
#include <string.h>

static const char *trim_left(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

static const char *trim_right(const char *a, const char *b)
{
    while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\r'))
        b--;
    return b;
}

/* A field of plain decimal digits (no sign); false on anything else or overflow. */
static bool parse_u64(const char *a, const char *b, uint64_t *v)
{
    a = trim_left(a, b);
    b = trim_right(a, b);
    if (a == b)
        return false;
    uint64_t x = 0;
    for (; a < b; a++) {
        unsigned d = (unsigned)(*a - '0');
        if (d > 9 || x > (UINT64_MAX - d) / 10)
            return false;
        x = x * 10 + d;
    }
    *v = x;
    return true;
}

static bool field_is(const char *a, const char *b, const char *word)
{
    a = trim_left(a, b);
    b = trim_right(a, b);
    if (b - a >= 2 && *a == '"' && b[-1] == '"') {
        a++;
        b--;
    }
    return (size_t)(b - a) == strlen(word) && memcmp(a, word, (size_t)(b - a)) == 0;
}

static int add(struct store_shards *s, uint64_t id, uint64_t count, struct err *e)
{
    if (s->n == s->cap) {
        size_t ncap = s->cap ? 2 * s->cap : 64;
        uint64_t *i2 = realloc(s->id, ncap * sizeof *i2);
        if (!i2)
            return err_set(e, ERR_NOMEM, "out of memory reading shards metadata");
        s->id = i2;
        uint64_t *c2 = realloc(s->count, ncap * sizeof *c2);
        if (!c2)
            return err_set(e, ERR_NOMEM, "out of memory reading shards metadata");
        s->count = c2;
        s->cap = ncap;
    }
    s->id[s->n] = id;
    s->count[s->n] = count;
    s->n++;
    return ERR_OK;
}

/* One shards file: a header naming id and count (either order), then one row per partition. */
int store_shards_add_file(struct store_shards *s, const char *name, const char *buf, size_t len, struct err *e)
{
    const char *p = buf, *end = buf + len;
    long col_id = -1, col_count = -1;
    size_t ncols = 0;
    for (unsigned long long line = 1; p < end; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = trim_right(p, nl ? nl : end);
        const char *next = nl ? nl + 1 : end;
        if (trim_left(p, le) == le) {
            p = next;
            continue;
        }
        uint64_t id = 0, count = 0;
        const bool header = ncols == 0;
        size_t c = 0;
        for (const char *fs = p;; c++) {
            const char *fe = memchr(fs, ',', (size_t)(le - fs));
            if (!fe)
                fe = le;
            if (header) {
                if (field_is(fs, fe, "id"))
                    col_id = (long)c;
                else if (field_is(fs, fe, "count"))
                    col_count = (long)c;
            } else if ((long)c == col_id || (long)c == col_count) {
                if (!parse_u64(fs, fe, (long)c == col_id ? &id : &count))
                    return err_set(e, ERR_INVALID_DATA, "%s: line %llu, column %zu: not a count", name,
                                   line, c + 1);
            }
            if (fe == le)
                break;
            fs = fe + 1;
        }
        if (header) {
            if (col_id < 0 || col_count < 0)
                return err_set(e, ERR_INVALID_DATA, "%s: line %llu: header must name id and count", name, line);
            ncols = c + 1;
        } else if (c + 1 != ncols) {
            return err_set(e, ERR_INVALID_DATA, "%s: line %llu: %zu fields, expected %zu", name, line, c + 1,
                           ncols);
        } else {
            int rc = add(s, id, count, e);
            if (rc)
                return rc;
        }
        p = next;
    }
    return ERR_OK;
}

static int cmp_pair(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Sorts by id (pairs packed for qsort) and rejects an id given two different counts. */
int store_shards_finish(struct store_shards *s, struct err *e)
{
    uint64_t *pairs = malloc(2 * (s->n ? s->n : 1) * sizeof *pairs);
    if (!pairs)
        return err_set(e, ERR_NOMEM, "out of memory reading shards metadata");
    for (size_t i = 0; i < s->n; i++) {
        pairs[2 * i] = s->id[i];
        pairs[2 * i + 1] = s->count[i];
    }
    qsort(pairs, s->n, 2 * sizeof *pairs, cmp_pair);
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (k && pairs[2 * i] == s->id[k - 1]) {
            if (pairs[2 * i + 1] != s->count[k - 1]) {
                unsigned long long id = pairs[2 * i];
                free(pairs);
                return err_set(e, ERR_INVALID_DATA, "shards metadata: id %llu has two different counts", id);
            }
            continue;
        }
        s->id[k] = pairs[2 * i];
        s->count[k] = pairs[2 * i + 1];
        k++;
    }
    s->n = k;
    free(pairs);
    return ERR_OK;
}

int store_shards_load(const char *url, const struct store_access *acc, struct store_shards *out,
                      struct err *e)
{
    memset(out, 0, sizeof *out);
    struct store_url u;
    int rc = store_url_parse(url, &u, e);
    if (rc == ERR_OK && (rc = store_url_set_remote(&u, acc ? acc->remote : NULL, e)) != ERR_OK)
        store_url_free(&u);
    if (rc)
        return rc;
    struct store_listing l;
    rc = store_list(&u, acc, &l, e);
    if (rc)
        err_prefix(e, "%s", url);
    for (size_t i = 0; rc == ERR_OK && i < l.n; i++) {
        struct store_blob b;
        rc = store_map(&u, &l.v[i], &b, e);
        if (rc)
            break;
        rc = store_shards_add_file(out, l.v[i].path, b.data, b.len, e);
        store_unmap(&b);
    }
    if (rc == ERR_OK)
        rc = store_shards_finish(out, e);
    store_listing_free(&l);
    store_url_free(&u);
    if (rc)
        store_shards_free(out);
    return rc;
}

void store_shards_free(struct store_shards *s)
{
    free(s->id);
    free(s->count);
    memset(s, 0, sizeof *s);
}

bool store_shards_partition_id(const char *name, uint64_t *id)
{
    if (strncmp(name, "part-", 5) != 0)
        return false;
    const char *a = name + 5, *b = a;
    while (*b >= '0' && *b <= '9')
        b++;
    return b > a && parse_u64(a, b, id);
}

bool store_shards_lookup(const struct store_shards *s, uint64_t id, uint64_t *count)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->id[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < s->n && s->id[lo] == id) {
        *count = s->count[lo];
        return true;
    }
    return false;
}
