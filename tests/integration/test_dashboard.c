/* test_dashboard.c — GET / and /static/NAME: web/'s files as embedded, with caching, gzip and their policy. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "client.h"
#include "jobs.h"

static struct daemon_proc D;

static void setup(void)
{
    cr_assert(daemon_start(&D), "traind did not start (see its log under /tmp/traind-it-*)");
}

static void teardown(void)
{
    daemon_stop_clean(&D);
}

TestSuite(dashboard, .init = setup, .fini = teardown, .timeout = 120);

/* web/NAME as it is in the source tree (caller frees), its size in len. */
static char *web_file(const char *name, size_t *len)
{
    const char *dir = getenv("TRAIND_WEB_DIR");
    cr_assert_not_null(dir, "TRAIND_WEB_DIR is not set (tests/integration/meson.build sets it)");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void get(const char *path, const char *header, struct http_reply *r)
{
    cr_assert(http_h(&D, "GET", path, NULL, NULL, header, r), "GET %s", path);
}

/* gzip bytes inflated with zlib (caller frees), their size in out_len. */
static unsigned char *gunzip(const char *in, size_t len, size_t *out_len)
{
    size_t cap = 4 * len + 4096;
    unsigned char *out = malloc(cap);
    cr_assert_not_null(out);
    z_stream z = {0};
    cr_assert_eq(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);   /* 16: a gzip header, not zlib's */
    z.next_in = (unsigned char *)in;
    z.avail_in = (uInt)len;
    int rc;
    do {
        if (z.total_out == cap) {
            cap *= 2;
            out = realloc(out, cap);
            cr_assert_not_null(out);
        }
        z.next_out = out + z.total_out;
        z.avail_out = (uInt)(cap - z.total_out);
        rc = inflate(&z, Z_NO_FLUSH);
    } while (rc == Z_OK);
    cr_assert_eq(rc, Z_STREAM_END, "not one whole gzip stream: zlib says %d", rc);
    *out_len = z.total_out;
    inflateEnd(&z);
    return out;
}

Test(dashboard, the_page_is_web_index_html_loading_its_script_and_styles_from_static)
{
    struct http_reply r;
    get("/", NULL, &r);
    cr_assert_eq(r.status, 200);
    char ct[128];
    cr_expect_str_eq(http_header(&r, "Content-Type", ct, sizeof ct), "text/html; charset=utf-8");
    size_t len;
    char *want = web_file("index.html", &len);
    cr_expect_eq(r.body_len, len);
    cr_expect(r.body_len == len && memcmp(r.body, want, len) == 0, "GET / is not web/index.html");
    cr_expect_not_null(strstr(r.body, "<script src=\"/static/app.js\""));
    cr_expect_not_null(strstr(r.body, "<link rel=\"stylesheet\" href=\"/static/style.css\">"));
    cr_expect_null(strstr(r.body, "<style"), "inline styles would need 'unsafe-inline'");
    cr_expect_null(strstr(r.body, "<script>"), "inline scripts would need 'unsafe-inline'");
    free(want);
    http_reply_free(&r);
}

Test(dashboard, every_file_in_web_is_served_at_static_as_it_is)
{
    const char *dir = getenv("TRAIND_WEB_DIR");
    cr_assert_not_null(dir);
    DIR *dp = opendir(dir);
    cr_assert_not_null(dp);
    int served = 0;
    for (struct dirent *e; (e = readdir(dp));) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "meson.build") == 0)
            continue;
        char path[512];
        snprintf(path, sizeof path, "/static/%s", e->d_name);
        struct http_reply r;
        get(path, NULL, &r);
        size_t len;
        char *want = web_file(e->d_name, &len);
        cr_expect_eq(r.status, 200, "%s", path);
        cr_expect(r.body_len == len && memcmp(r.body, want, len) == 0, "%s differs from web/%s", path, e->d_name);
        free(want);
        http_reply_free(&r);
        served++;
    }
    closedir(dp);
    cr_expect_geq(served, 4, "index.html, app.js, chart.js, style.css at least");
}

Test(dashboard, each_file_has_its_content_type)
{
    static const char *const files[][2] = {
        {"/static/app.js", "text/javascript; charset=utf-8"},
        {"/static/chart.js", "text/javascript; charset=utf-8"},
        {"/static/style.css", "text/css; charset=utf-8"},
        {"/static/index.html", "text/html; charset=utf-8"},
    };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        struct http_reply r;
        get(files[i][0], NULL, &r);
        char ct[128], nosniff[64];
        cr_expect_eq(r.status, 200, "%s", files[i][0]);
        cr_expect_str_eq(http_header(&r, "Content-Type", ct, sizeof ct), files[i][1], "%s", files[i][0]);
        cr_expect_str_eq(http_header(&r, "X-Content-Type-Options", nosniff, sizeof nosniff), "nosniff");
        http_reply_free(&r);
    }
}

Test(dashboard, the_policy_allows_only_this_daemons_files_and_nothing_inline)
{
    static const char *const paths[] = {"/", "/static/app.js", "/static/style.css"};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        struct http_reply r;
        get(paths[i], NULL, &r);
        char csp[512];
        cr_assert_not_null(http_header(&r, "Content-Security-Policy", csp, sizeof csp), "%s: no CSP", paths[i]);
        cr_expect_not_null(strstr(csp, "default-src 'none'"), "%s", csp);
        cr_expect_not_null(strstr(csp, "script-src 'self'"), "%s", csp);
        cr_expect_not_null(strstr(csp, "style-src 'self'"), "%s", csp);
        cr_expect_not_null(strstr(csp, "connect-src 'self'"), "%s", csp);
        cr_expect_null(strstr(csp, "unsafe-inline"), "%s", csp);
        cr_expect_null(strstr(csp, "unsafe-eval"), "%s", csp);
        cr_expect_null(strstr(csp, "http"), "no other origin: %s", csp);
        http_reply_free(&r);
    }
}

Test(dashboard, a_request_with_the_etag_in_if_none_match_is_answered_304_without_a_body)
{
    struct http_reply r;
    get("/static/app.js", NULL, &r);
    char etag[128], cc[64], hdr[200];
    cr_assert_not_null(http_header(&r, "ETag", etag, sizeof etag));
    cr_expect_eq(etag[0], '"', "a strong ETag, quoted: %s", etag);
    cr_expect_str_eq(http_header(&r, "Cache-Control", cc, sizeof cc), "no-cache");
    http_reply_free(&r);

    snprintf(hdr, sizeof hdr, "If-None-Match: %s", etag);
    get("/static/app.js", hdr, &r);
    char again[128];
    cr_expect_eq(r.status, 304);
    cr_expect_eq(r.body_len, 0);
    cr_expect_str_eq(http_header(&r, "ETag", again, sizeof again), etag);
    http_reply_free(&r);

    snprintf(hdr, sizeof hdr, "If-None-Match: \"other\", W/%s", etag);   /* a list; W/ compares weakly */
    get("/static/app.js", hdr, &r);
    cr_expect_eq(r.status, 304);
    http_reply_free(&r);

    get("/static/app.js", "If-None-Match: \"not-this-one\"", &r);
    cr_expect_eq(r.status, 200);
    http_reply_free(&r);

    snprintf(hdr, sizeof hdr, "If-None-Match: %s", etag);
    get("/static/style.css", hdr, &r);
    cr_expect_eq(r.status, 200, "another file's ETag");
    http_reply_free(&r);
}

Test(dashboard, gzip_is_sent_when_accepted_and_inflates_to_the_file)
{
    size_t len;
    char *want = web_file("app.js", &len);
    struct http_reply r;
    get("/static/app.js", "Accept-Encoding: br, gzip;q=0.8", &r);
    char ce[64], vary[64], etag[128];
    cr_assert_eq(r.status, 200);
    cr_assert_str_eq(http_header(&r, "Content-Encoding", ce, sizeof ce), "gzip");
    cr_expect_str_eq(http_header(&r, "Vary", vary, sizeof vary), "Accept-Encoding");
    cr_expect_lt(r.body_len, len, "compressed");
    size_t n;
    unsigned char *plain = gunzip(r.body, r.body_len, &n);
    cr_expect(n == len && memcmp(plain, want, len) == 0, "the gzip body does not inflate to web/app.js");
    cr_assert_not_null(http_header(&r, "ETag", etag, sizeof etag));
    free(plain);
    free(want);
    http_reply_free(&r);

    /* The gzip bytes are another representation: another ETag. */
    get("/static/app.js", NULL, &r);
    char plain_etag[128];
    cr_assert_not_null(http_header(&r, "ETag", plain_etag, sizeof plain_etag));
    cr_expect_str_neq(plain_etag, etag);
    http_reply_free(&r);
}

Test(dashboard, gzip_is_not_sent_to_a_client_that_refuses_it)
{
    static const char *const refusals[] = {"Accept-Encoding: gzip;q=0", "Accept-Encoding: identity", NULL};
    for (size_t i = 0; i < sizeof refusals / sizeof *refusals; i++) {
        struct http_reply r;
        get("/static/chart.js", refusals[i], &r);
        char ce[64], vary[64];
        cr_expect_eq(r.status, 200);
        cr_expect_null(http_header(&r, "Content-Encoding", ce, sizeof ce), "%s", refusals[i] ? refusals[i] : "none");
        cr_expect_str_eq(http_header(&r, "Vary", vary, sizeof vary), "Accept-Encoding");
        http_reply_free(&r);
    }
}

Test(dashboard, no_file_in_web_names_another_origin)
{
    static const char *const files[] = {"index.html", "app.js", "chart.js", "style.css"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        size_t len;
        char *text = web_file(files[i], &len);
        cr_expect_null(strstr(text, "http://"), "web/%s names an http:// URL", files[i]);
        cr_expect_null(strstr(text, "https://"), "web/%s names an https:// URL", files[i]);
        cr_expect_null(strstr(text, "src=\"//"), "web/%s loads from another origin", files[i]);
        cr_expect_null(strstr(text, "href=\"//"), "web/%s links another origin", files[i]);
        free(text);
    }
}

Test(dashboard, a_file_that_was_not_embedded_is_404)
{
    struct http_reply r;
    get("/static/missing.js", NULL, &r);
    cr_expect_eq(r.status, 404);
    cr_expect_str_eq(reply_error_code(&r), "not_found");
    http_reply_free(&r);
}
