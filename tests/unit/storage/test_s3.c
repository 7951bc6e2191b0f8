/* test_s3.c — s3.h against s3rver (tests/servers/s3.js): listing pages and globs, byte-exact GETs, S3 errors. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3.h"
#include "test_servers.h"

static struct test_server srv;
static struct s3_client *client;

/* name, contents: five partitions, plus objects the glob or the prefix must leave out. */
static const char *const objects[][2] = {
    {"csv/dev/part-00003.csv", "3,3\n"},
    {"csv/dev/part-00000.csv", "0,0\n0,1\n"},
    {"csv/dev/part-00004.csv", "4,4\n"},
    {"csv/dev/part-00001.csv", "1,1\n"},
    {"csv/dev/part-00002.csv", "2,2\n2,2\n2,2\n"},
    {"csv/dev/other.csv", "o\n"},
    {"csv/dev/sub/part-00009.csv", "s\n"},
    {"csv/devnull/part-00000.csv", "n\n"},
    {"csv/odd/a b+c=d\xc3\xa9.csv", "odd,key\n"},
};
#define N_OBJECTS (sizeof objects / sizeof objects[0])

static void start(void)
{
    cr_assert(test_server_tmpdir(&srv));
    static char puts_[N_OBJECTS][1024];
    const char *args[8 + 2 * N_OBJECTS];
    size_t n = 0;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/s3", srv.tmp);
    args[n++] = "--dir";
    args[n++] = dir;
    args[n++] = "--bucket";
    args[n++] = "bk";
    for (size_t i = 0; i < N_OBJECTS; i++) {
        char rel[512];
        snprintf(rel, sizeof rel, "files/%zu", i);
        cr_assert(test_server_write(&srv, rel, objects[i][1], strlen(objects[i][1])));
        snprintf(puts_[i], sizeof puts_[i], "bk/%s=%s/%s", objects[i][0], srv.tmp, rel);
        args[n++] = "--put";
        args[n++] = puts_[i];
    }
    args[n] = NULL;
    TEST_SERVER_START_OR_SKIP(&srv, "s3.js", args);
}

static void fast_http(struct http_options *o)
{
    http_options_default(o);
    o->backoff_base_ms = 1;
    o->backoff_cap_ms = 5;
    o->stall_timeout_s = 2;
}

/* s3rver knows one key pair, S3RVER/S3RVER, and does not check SigV4 signatures (test_sigv4.c does). */
static void make_client_with(const char *key, int max_keys, bool anonymous)
{
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", srv.port);
    struct s3_config cfg = {.endpoint = endpoint, .region = "us-east-1", .access_key = key,
                            .secret_key = "S3RVER", .max_keys = max_keys, .anonymous = anonymous};
    struct http_options o;
    fast_http(&o);
    struct err e = {0};
    cr_assert_eq(s3_client_new(&cfg, &o, &client, &e), ERR_OK, "%s", e.msg);
}

static void teardown(void)
{
    s3_client_free(client);
    client = NULL;
    test_server_stop(&srv);
}

TestSuite(s3, .fini = teardown);

Test(s3, listing_follows_pages_of_two_and_returns_the_glob_matches_sorted)
{
    start();
    make_client_with("S3RVER", 2, false);
    struct s3_listing l;
    struct err e = {0};
    cr_assert_eq(s3_list(client, "bk", "csv/dev/", "part*.csv", &l, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(l.n, 5);
    for (size_t i = 0; i < 5; i++) {
        char want[64];
        snprintf(want, sizeof want, "csv/dev/part-%05zu.csv", i);
        cr_assert_str_eq(l.v[i].key, want);
        cr_assert_neq(l.v[i].etag[0], '\0');
    }
    cr_assert_eq(l.v[0].size, 8);
    cr_assert_eq(l.v[2].size, 12);
    /* prefix "csv/dev/part" holds exactly the five: pages of 2, 2 and 1. */
    cr_assert_eq(http_client_attempts(s3_client_http(client)), 3);
    s3_listing_free(&l);
}

Test(s3, a_star_does_not_cross_a_slash)
{
    start();
    make_client_with("S3RVER", 0, false);
    struct s3_listing l;
    struct err e = {0};
    cr_assert_eq(s3_list(client, "bk", "csv/dev/", "*.csv", &l, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(l.n, 6);
    cr_assert_str_eq(l.v[0].key, "csv/dev/other.csv");
    for (size_t i = 0; i < l.n; i++)
        cr_assert_null(strstr(l.v[i].key, "sub/"), "%s", l.v[i].key);
    s3_listing_free(&l);
}

Test(s3, a_glob_matching_nothing_is_an_empty_listing)
{
    start();
    make_client_with("S3RVER", 0, false);
    struct s3_listing l;
    struct err e = {0};
    cr_assert_eq(s3_list(client, "bk", "csv/dev/", "nothing*.csv", &l, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(l.n, 0);
    s3_listing_free(&l);
}

Test(s3, get_object_into_memory_is_byte_exact)
{
    start();
    make_client_with("S3RVER", 0, false);
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(s3_get_mem(client, "bk", "csv/dev/part-00002.csv", &r, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(r.body_len, strlen(objects[4][1]));
    cr_assert_eq(memcmp(r.body, objects[4][1], r.body_len), 0);
    cr_assert_neq(r.etag[0], '\0');
    http_result_free(&r);
}

Test(s3, a_key_with_spaces_plus_equals_and_utf8_round_trips)
{
    start();
    make_client_with("S3RVER", 0, false);
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(s3_get_mem(client, "bk", objects[8][0], &r, &e), ERR_OK, "%s", e.msg);
    cr_assert_str_eq(r.body, objects[8][1]);
    http_result_free(&r);
    struct s3_listing l;
    cr_assert_eq(s3_list(client, "bk", "csv/odd/", "a b*", &l, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(l.n, 1);
    cr_assert_str_eq(l.v[0].key, objects[8][0]);
    s3_listing_free(&l);
}

Test(s3, get_object_into_a_file_is_byte_exact)
{
    start();
    make_client_with("S3RVER", 0, false);
    char path[512];
    snprintf(path, sizeof path, "%s/got.csv", srv.tmp);
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(s3_get_file(client, "bk", "csv/dev/part-00000.csv", path, &r, &e), ERR_OK, "%s", e.msg);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    char got[64] = {0};
    size_t n = fread(got, 1, sizeof got - 1, f);
    fclose(f);
    cr_assert_eq(n, strlen(objects[1][1]));
    cr_assert_str_eq(got, objects[1][1]);
    http_result_free(&r);
}

Test(s3, a_missing_key_is_data_unavailable_with_s3s_code)
{
    start();
    make_client_with("S3RVER", 0, false);
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(s3_get_mem(client, "bk", "csv/dev/part-99999.csv", &r, &e), ERR_DATA_UNAVAILABLE);
    cr_assert_not_null(strstr(e.msg, "NoSuchKey"), "%s", e.msg);
    cr_assert_not_null(strstr(e.msg, "s3://bk/csv/dev/part-99999.csv"), "%s", e.msg);
    cr_assert_eq(http_client_attempts(s3_client_http(client)), 1);
    http_result_free(&r);
}

Test(s3, a_missing_bucket_is_data_unavailable_with_s3s_code)
{
    start();
    make_client_with("S3RVER", 0, false);
    struct s3_listing l;
    struct err e = {0};
    cr_assert_eq(s3_list(client, "nobucket", "csv/", "*.csv", &l, &e), ERR_DATA_UNAVAILABLE);
    cr_assert_not_null(strstr(e.msg, "NoSuchBucket"), "%s", e.msg);
    cr_assert_eq(http_client_attempts(s3_client_http(client)), 1);
}

Test(s3, an_error_says_its_kind_and_status_but_never_the_servers_own_text)
{
    start();
    make_client_with("S3RVER", 0, false);
    struct s3_listing l;
    struct err e = {0};
    cr_assert_eq(s3_list(client, "nobucket", "csv/", "*.csv", &l, &e), ERR_DATA_UNAVAILABLE);
    cr_expect_not_null(strstr(e.msg, "HTTP 404"), "%s", e.msg);
    cr_expect_not_null(strstr(e.msg, "not found"), "%s", e.msg);
    cr_expect_null(strstr(e.msg, "specified bucket does not exist"), "%s", e.msg); /* s3rver's <Message> */
}

Test(s3, an_unknown_access_key_is_auth_failed_without_the_secret_in_the_message)
{
    start();
    make_client_with("NOTAKEY", 0, false);
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(s3_get_mem(client, "bk", "csv/dev/part-00000.csv", &r, &e), ERR_AUTH, "%s", e.msg);
    cr_assert_not_null(strstr(e.msg, "InvalidAccessKeyId"), "%s", e.msg);
    cr_assert_null(strstr(e.msg, "S3RVER"), "%s", e.msg);
    cr_assert_eq(http_client_attempts(s3_client_http(client)), 1);
    http_result_free(&r);
}

Test(s3, anonymous_requests_are_not_signed_and_work_on_an_open_server)
{
    start();
    make_client_with(NULL, 0, true);
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(s3_get_mem(client, "bk", "csv/dev/part-00001.csv", &r, &e), ERR_OK, "%s", e.msg);
    cr_assert_str_eq(r.body, objects[3][1]);
    http_result_free(&r);
}

Test(s3, credentials_come_from_the_environment)
{
    setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "secretenv", 1);
    setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9/", 1);
    setenv("AWS_DEFAULT_REGION", "eu-west-3", 1);
    struct s3_config cfg = {0};
    struct http_options o;
    http_options_default(&o);
    struct err e = {0};
    cr_assert_eq(s3_client_new(&cfg, &o, &client, &e), ERR_OK, "%s", e.msg);
    char *url = s3_url(client, "bk", "a/b.csv", NULL);
    cr_assert_str_eq(url, "http://127.0.0.1:9/bk/a/b.csv");
    free(url);
}

Test(s3, no_credentials_and_not_anonymous_is_auth_failed)
{
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    struct s3_config cfg = {.endpoint = "http://127.0.0.1:9"};
    struct http_options o;
    http_options_default(&o);
    struct err e = {0};
    cr_assert_eq(s3_client_new(&cfg, &o, &client, &e), ERR_AUTH);
    cr_assert_null(client);
}

Test(s3, aws_urls_are_virtual_hosted_and_dotted_buckets_path_style)
{
    unsetenv("AWS_ENDPOINT_URL");
    unsetenv("AWS_ENDPOINT_URL_S3");
    struct s3_config cfg = {.region = "eu-west-1", .anonymous = true};
    struct http_options o;
    http_options_default(&o);
    struct err e = {0};
    cr_assert_eq(s3_client_new(&cfg, &o, &client, &e), ERR_OK, "%s", e.msg);
    char *url = s3_url(client, "my-bucket", "csv/dev/part 1.csv", "list-type=2");
    cr_assert_str_eq(url, "https://my-bucket.s3.eu-west-1.amazonaws.com/csv/dev/part%201.csv?list-type=2");
    free(url);
    url = s3_url(client, "my.bucket", "k", NULL);
    cr_assert_str_eq(url, "https://s3.eu-west-1.amazonaws.com/my.bucket/k");
    free(url);
}

Test(s3, error_documents_give_code_and_message_with_entities_decoded)
{
    char code[64], msg[128];
    s3_parse_error("<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code>"
                   "<Message>Access &amp; &lt;denied&gt; &#233;</Message></Error>",
                   code, sizeof code, msg, sizeof msg);
    cr_assert_str_eq(code, "AccessDenied");
    cr_assert_str_eq(msg, "Access & <denied> \xc3\xa9");
    s3_parse_error("not xml", code, sizeof code, msg, sizeof msg);
    cr_assert_str_eq(code, "");
}
