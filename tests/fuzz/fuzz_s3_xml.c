/*
 * fuzz_s3_xml.c — what an S3 server sends back (storage/s3.c): a ListObjectsV2 page and an
 * error document. The input is "dir\nglob\n" then the XML, in a buffer of exactly its size.
 * Invariants: every object kept starts with dir and its name matches glob (the listing's
 * contract), there are no more of them than <Contents> elements in the page or than the
 * --list-max-keys budget they were counted against, and a continuation token comes back
 * only from a page that says <IsTruncated>true; the error's code and message fit the
 * buffers given for them.
 */
#include <fnmatch.h>
#include <string.h>

#include "fuzz.h"
#include "s3.h"

/* The bytes up to the next '\n' (or the end) as a string; *p and *n move past them. */
static char *take_line(const uint8_t **p, size_t *n)
{
    const uint8_t *nl = memchr(*p, '\n', *n);
    size_t l = nl ? (size_t)(nl - *p) : *n;
    char *s = strndup((const char *)*p, l);
    *p += nl ? l + 1 : l;
    *n -= nl ? l + 1 : l;
    return s;
}

static size_t count(const char *xml, size_t len, const char *what)
{
    size_t c = 0, wl = strlen(what);
    for (const char *p = xml; (p = memmem(p, len - (size_t)(p - xml), what, wl)) != NULL; p += wl)
        c++;
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data;
    size_t n = size;
    char *dir = take_line(&p, &n), *glob = take_line(&p, &n);
    char *xml = malloc(n ? n : 1);
    memcpy(xml, p, n);

    struct s3_listing out = {0};
    size_t cap = 0;
    char *token = (char *)"unset";
    struct err e = {0};
    uint64_t max_keys = size % 5, keys_left = max_keys;   /* --list-max-keys, small now and then */
    if (max_keys == 4)
        keys_left = max_keys = UINT64_MAX;
    int rc = s3_list_parse_page(xml, n, dir, glob, &out, &cap, &keys_left, &token, "fuzz", &e);
    FUZZ_CHECK(out.n <= cap && out.n <= count(xml, n, "<Contents>"), "%zu objects of %zu slots", out.n, cap);
    FUZZ_CHECK(out.n <= max_keys - keys_left, "%zu objects kept, %llu counted", out.n,
               (unsigned long long)(max_keys - keys_left));
    size_t dl = strlen(dir);
    for (size_t i = 0; i < out.n; i++) {
        const char *k = out.v[i].key;
        FUZZ_CHECK(strncmp(k, dir, dl) == 0 && fnmatch(glob, k + dl, FNM_PATHNAME | FNM_PERIOD) == 0,
                   "key '%s' is not dir '%s' + a match of '%s'", k, dir, glob);
        FUZZ_CHECK(memchr(out.v[i].etag, '\0', sizeof out.v[i].etag), "an unterminated ETag");
    }
    if (rc == ERR_OK) {
        FUZZ_CHECK(!token || memmem(xml, n, "<IsTruncated>true</IsTruncated>", 31),
                   "a continuation token from a page not truncated");
        free(token);
    }
    s3_listing_free(&out);

    /* The error document is read from a NUL-terminated body (http_get_mem's). */
    char *body = strndup(xml, n);
    char code[16], msg[64];
    s3_parse_error(body, code, sizeof code, msg, sizeof msg);
    FUZZ_CHECK(strlen(code) < sizeof code && strlen(msg) < sizeof msg, "an error overran its buffer");
    free(body);
    free(xml);
    free(dir);
    free(glob);
    return 0;
}
