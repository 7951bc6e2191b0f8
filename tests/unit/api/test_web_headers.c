/* test_web_headers.c — how the dashboard's files read Accept-Encoding and If-None-Match (api/web.h). */
#include <criterion/criterion.h>

#include "web.h"

Test(web_headers, gzip_is_accepted_when_named_or_starred_with_a_q_above_0)
{
    cr_expect(api_web_accepts_gzip("gzip"));
    cr_expect(api_web_accepts_gzip("gzip, deflate, br"));
    cr_expect(api_web_accepts_gzip("br;q=1.0, gzip;q=0.5"));
    cr_expect(api_web_accepts_gzip("GZIP"));
    cr_expect(api_web_accepts_gzip("x-gzip"));
    cr_expect(api_web_accepts_gzip("*"));
    cr_expect(api_web_accepts_gzip("identity, gzip ; q=0.1"));
}

Test(web_headers, gzip_is_refused_when_absent_or_with_q_0)
{
    cr_expect_not(api_web_accepts_gzip(NULL));
    cr_expect_not(api_web_accepts_gzip(""));
    cr_expect_not(api_web_accepts_gzip("identity"));
    cr_expect_not(api_web_accepts_gzip("br, deflate"));
    cr_expect_not(api_web_accepts_gzip("gzip;q=0"));
    cr_expect_not(api_web_accepts_gzip("gzip;q=0.000"));
    cr_expect_not(api_web_accepts_gzip("gzipped"));
    cr_expect_not(api_web_accepts_gzip("*;q=0"));
}

Test(web_headers, if_none_match_names_the_etag_in_a_list_weakly_or_as_star)
{
    const char *tag = "\"abc\"";
    cr_expect(api_web_etag_matches("\"abc\"", tag));
    cr_expect(api_web_etag_matches("\"x\", \"abc\"", tag));
    cr_expect(api_web_etag_matches("\"x\" ,W/\"abc\" ", tag));
    cr_expect(api_web_etag_matches("*", tag));
    cr_expect_not(api_web_etag_matches(NULL, tag));
    cr_expect_not(api_web_etag_matches("", tag));
    cr_expect_not(api_web_etag_matches("\"abcd\"", tag));
    cr_expect_not(api_web_etag_matches("\"ab\"", tag));
    cr_expect_not(api_web_etag_matches("abc", tag));
}

Test(web_headers, the_page_is_index_html_and_static_names_a_file_exactly)
{
    const struct api_web_file *f = api_web_find("/");
    cr_assert_not_null(f);
    cr_expect_str_eq(f->name, "index.html");
    cr_expect_eq(api_web_find("/static/index.html"), f);
    cr_expect_not_null(api_web_find("/static/app.js"));
    cr_expect_null(api_web_find("/static/"));
    cr_expect_null(api_web_find("/static/app"));
    cr_expect_null(api_web_find("/app.js"));
    cr_expect_null(api_web_find("/static/../static/app.js"));
}
