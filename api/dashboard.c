/* dashboard.c — GET / and /static/NAME: the dashboard's files (web/), embedded in the binary. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <microhttpd.h>

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

/*
 * A dashboard file, from the binary as it is: 304 when If-None-Match names its ETag, gzip when
 * Accept-Encoding takes it. no-cache: the browser keeps it but asks each time, since the same
 * URL serves the next build's file.
 */
int api_web_send(struct MHD_Connection *c, const struct api_web_file *f, unsigned *status_out)
{
    bool gz = api_web_accepts_gzip(MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING));
    const char *etag = gz ? f->gz_etag : f->etag;
    const char *inm = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
    unsigned status = api_web_etag_matches(inm, etag) ? 304 : 200;
    size_t len = status == 304 ? 0 : gz ? f->gz_len : f->len;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)(gz ? f->gz : f->data), MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    if (status == 200) {
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, f->type);
        if (gz)
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, MHD_HTTP_HEADER_ACCEPT_ENCODING);
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(resp, "Content-Security-Policy", API_WEB_CSP);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
    enum MHD_Result rc = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    *status_out = status;
    return rc;
}
