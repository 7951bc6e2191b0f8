/*
 * fuzz_http_listing.c — an http(s) .list file (storage/store_http.c): object URLs one a line,
 * absolute, host-absolute or relative to the listing. The input is the listing's own URL,
 * a '\n', then the text a server sent. Invariants: every object is an http(s) URL without
 * credentials (they would show in messages), named by a non-empty last component without
 * '/', '?' or '#'; there are no more objects than lines or than --list-max-keys; they are
 * sorted by name.
 */
#include <string.h>

#include "fuzz.h"
#include "store.h"

static bool is_http(const char *s)
{
    return strncmp(s, "http://", 7) == 0 || strncmp(s, "https://", 8) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    if (!nl)
        return 0;
    char *url = strndup((const char *)data, (size_t)(nl - data));
    struct store_url u;
    struct err e = {0};
    bool usable = strlen(url) == (size_t)(nl - data) && store_url_parse(url, &u, &e) == ERR_OK;
    if (usable) {
        usable = u.scheme == STORE_SCHEME_HTTP;   /* as store_list is given it */
        store_url_free(&u);
    }
    if (!usable) {
        free(url);
        return 0;
    }
    size_t n = size - (size_t)(nl - data) - 1;
    char *body = malloc(n + 1);
    memcpy(body, nl + 1, n);
    body[n] = '\0';
    size_t lines = 1;
    for (size_t i = 0; i < n; i++)
        lines += body[i] == '\n';

    struct store_listing out;
    uint64_t max_keys = size % 3 == 0 ? 2 : UINT64_MAX;   /* --list-max-keys, small now and then */
    if (store_http_parse_listing(url, body, max_keys, &out, &e) == ERR_OK) {
        FUZZ_CHECK(out.n > 0 && out.n <= lines && out.n <= max_keys, "%zu objects from %zu lines", out.n, lines);
        for (size_t i = 0; i < out.n; i++) {
            const struct store_object *o = &out.v[i];
            FUZZ_CHECK(is_http(o->path), "object '%s' is not an http(s) URL", o->path);
            const char *host = strstr(o->path, "://") + 3;
            FUZZ_CHECK(!memchr(host, '@', strcspn(host, "/?#")), "credentials in '%s'", o->path);
            FUZZ_CHECK(o->name[0] && !strpbrk(o->name, "/?#"), "object '%s' named '%s'", o->path, o->name);
            FUZZ_CHECK(i == 0 || strcmp(out.v[i - 1].name, o->name) <= 0, "not sorted by name");
        }
        store_listing_free(&out);
    }
    free(body);
    free(url);
    return 0;
}
