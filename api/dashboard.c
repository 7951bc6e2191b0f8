/* dashboard.c — GET / and /static/NAME: the dashboard's files (web/), embedded in the binary. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "handlers.h"
#include "web.h"

/*
 * The files hold no data: the page reads everything from the API with fetch(), with the bearer
 * token typed into the page when traind has one. server.c sends them with ETag, gzip and
 * Cache-Control; this route is what api_route answers for GET / without those.
 */
void api_get_dashboard(const struct api_ctx *ctx, struct api_response *resp)
{
    const struct api_web_file *f = api_web_find("/");
    char *copy = f ? malloc(f->len + 1) : NULL;
    if (!copy) {
        api_error(resp, 500, "internal", f ? "out of memory" : "no index.html was embedded");
        return;
    }
    memcpy(copy, f->data, f->len);
    copy[f->len] = '\0';
    resp->status = 200;
    resp->text = copy;
    resp->text_len = f->len;
    resp->content_type = f->type;
}

const struct api_web_file *api_web_find(const char *path)
{
    const char *name = strcmp(path, "/") == 0 ? "index.html"
                       : strncmp(path, "/static/", 8) == 0 ? path + 8 : NULL;
    if (!name)
        return NULL;
    for (size_t i = 0; i < api_web_nfiles; i++)
        if (strcmp(api_web_files[i].name, name) == 0)
            return &api_web_files[i];
    return NULL;
}

static const char *skip_ows(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* Whether the item [p, end) of a comma-separated list is token (case-insensitive) with no q=0. */
static bool item_accepts(const char *p, const char *end, const char *token)
{
    size_t n = strlen(token);
    p = skip_ows(p);
    if ((size_t)(end - p) < n || strncasecmp(p, token, n) != 0)
        return false;
    p = skip_ows(p + n);
    if (p == end)
        return true;
    if (*p != ';')
        return false;
    p = skip_ows(p + 1);
    if (end - p < 2 || (p[0] != 'q' && p[0] != 'Q') || p[1] != '=')
        return true;              /* a parameter other than q */
    return strtod(p + 2, NULL) > 0;
}

bool api_web_accepts_gzip(const char *accept_encoding)
{
    for (const char *p = accept_encoding; p && *p;) {
        const char *end = p + strcspn(p, ",");
        if (item_accepts(p, end, "gzip") || item_accepts(p, end, "x-gzip") || item_accepts(p, end, "*"))
            return true;
        p = *end ? end + 1 : end;
    }
    return false;
}

bool api_web_etag_matches(const char *if_none_match, const char *etag)
{
    size_t n = strlen(etag);
    for (const char *p = if_none_match; p && *p;) {
        p = skip_ows(p);
        const char *end = p + strcspn(p, ",");
        const char *e = end;
        while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (e - p == 1 && *p == '*')
            return true;
        if (e - p >= 2 && strncmp(p, "W/", 2) == 0)
            p += 2;
        if ((size_t)(e - p) == n && memcmp(p, etag, n) == 0)
            return true;
        p = *end ? end + 1 : end;
    }
    return false;
}
