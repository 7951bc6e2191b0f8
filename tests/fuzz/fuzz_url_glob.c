/*
 * fuzz_url_glob.c — data URLs and globs (storage/url.c, storage/s3.c, storage/http.c). The
 * input is three lines: a URL, a glob and a name.
 * Invariants: a parsed URL's pattern is one component (no '/') that ends the URL, or "*" for a
 * URL ending in '/'; its location is what comes before that '/' ("." or "/" for none); an
 * http(s) URL that parses names no credentials; a redacted URL (what messages show) keeps no
 * user, password, query or fragment; every name a glob matches starts with the literal prefix
 * S3 is asked to list; a key UriEncoded into a signed request's URL holds only unreserved
 * characters and %XX, and decodes back to the key.
 */
#include <fnmatch.h>
#include <string.h>

#include "fuzz.h"
#include "http.h"
#include "s3.h"
#include "store.h"

static char *take_line(const uint8_t **p, size_t *n)
{
    const uint8_t *nl = memchr(*p, '\n', *n);
    size_t l = nl ? (size_t)(nl - *p) : *n;
    char *s = strndup((const char *)*p, l);
    *p += nl ? l + 1 : l;
    *n -= nl ? l + 1 : l;
    return s;
}

static bool ends_with(const char *s, const char *t)
{
    size_t a = strlen(s), b = strlen(t);
    return a >= b && memcmp(s + a - b, t, b) == 0;
}

static void check_url(const char *url)
{
    struct store_url u;
    struct err e = {0};
    if (store_url_parse(url, &u, &e) != ERR_OK)
        return;
    FUZZ_CHECK(!strchr(u.pattern, '/'), "pattern '%s' of '%s'", u.pattern, url);
    size_t ll = strlen(u.location);
    bool ends_slash = ends_with(url, "/");
    if (ends_slash)
        FUZZ_CHECK(strcmp(u.pattern, "*") == 0, "'%s' ends in '/' but its pattern is '%s'", url, u.pattern);
    else
        FUZZ_CHECK(ends_with(url, u.pattern), "'%s' does not end in its pattern '%s'", url, u.pattern);
    /* What url.c splits: the path of file://, what follows s3://, the whole http(s) URL. */
    const char *path = url;
    if (u.scheme == STORE_SCHEME_S3)
        path += strlen("s3://");
    else if (u.scheme == STORE_SCHEME_FILE && strncmp(url, "file://", 7) == 0)
        path += strncmp(url + 7, "localhost/", 10) == 0 ? 7 + strlen("localhost") : 7;
    const char *slash = strrchr(path, '/');
    if (!slash)
        FUZZ_CHECK(strcmp(u.location, ".") == 0, "'%s' has no '/' but its location is '%s'", url, u.location);
    else if (slash == path)
        FUZZ_CHECK(strcmp(u.location, "/") == 0, "'%s' starts with its only '/' but its location is '%s'", url,
                   u.location);
    else
        FUZZ_CHECK(ll == (size_t)(slash - path) && memcmp(path, u.location, ll) == 0,
                   "location '%s' is not what precedes the last '/' of '%s'", u.location, url);
    if (u.scheme == STORE_SCHEME_HTTP) {
        const char *host = strstr(url, "://") + 3;
        FUZZ_CHECK(!memchr(host, '@', strcspn(host, "/?#")), "credentials in '%s' were accepted", url);
    }
    store_url_free(&u);
}

static void check_redact(const char *url)
{
    char out[512];
    http_url_redact(url, out, sizeof out);
    /* Where a URL parser (curl's) finds userinfo: after "scheme://", or at the start without one. */
    size_t sl = strspn(out, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.");
    const char *host = sl && strncmp(out + sl, "://", 3) == 0 ? out + sl + 3 : out;
    FUZZ_CHECK(!memchr(host, '@', strcspn(host, "/")), "'%s' redacted keeps a user: '%s'", url, out);
    FUZZ_CHECK(!strpbrk(out, "?#"), "'%s' redacted keeps a query or fragment: '%s'", url, out);
}

static void check_glob(const char *glob, const char *name)
{
    size_t lit = s3_glob_literal_len(glob);
    FUZZ_CHECK(lit <= strlen(glob), "literal prefix %zu of '%s'", lit, glob);
    if (fnmatch(glob, name, FNM_PATHNAME | FNM_PERIOD) == 0)
        FUZZ_CHECK(strncmp(name, glob, lit) == 0, "'%s' matches '%s' but does not start with its %zu literal bytes",
                   name, glob, lit);
}

static int hex_value(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static void check_uri_encode(const char *key, bool keep_slash)
{
    char *enc = s3_uri_encode(key, keep_slash);
    FUZZ_CHECK(enc != NULL, "s3_uri_encode failed");
    size_t n = 0;
    for (const char *p = enc; *p; p++, n++) {
        if (*p == '%') {
            FUZZ_CHECK(hex_value(p[1]) >= 0 && hex_value(p[2]) >= 0, "a bad escape in '%s'", enc);
            FUZZ_CHECK((char)(hex_value(p[1]) * 16 + hex_value(p[2])) == key[n], "'%s' does not decode to '%s'",
                       enc, key);
            p += 2;
            continue;
        }
        FUZZ_CHECK(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~", *p) ||
                       (keep_slash && *p == '/'),
                   "'%c' left unencoded in '%s'", *p, enc);
        FUZZ_CHECK(*p == key[n], "'%s' does not decode to '%s'", enc, key);
    }
    FUZZ_CHECK(n == strlen(key), "'%s' decodes to %zu bytes, not the %zu of '%s'", enc, n, strlen(key), key);
    free(enc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data;
    size_t n = size;
    char *url = take_line(&p, &n), *glob = take_line(&p, &n), *name = take_line(&p, &n);
    check_url(url);
    check_redact(url);
    check_glob(glob, name);
    check_uri_encode(name, true);
    check_uri_encode(name, false);
    free(url);
    free(glob);
    free(name);
    return 0;
}
