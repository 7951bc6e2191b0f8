/*
 * test_sigv4.c — our half of SigV4: the SHA-256 of the payload header, the canonical
 * query string, the request we hand libcurl. libcurl computes the signature, so each
 * request goes to a loopback capture server and the Authorization header it received
 * is compared with AWS's published examples or with tests/fixtures/storage_sigv4_make.py
 * (Python hashlib + hmac). s3rver does not check SigV4 signatures, hence these tests.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http.h"
#include "s3.h"
#include "sha256.h"
#include "test_servers.h"

#ifndef FIXTURES_DIR
#error "FIXTURES_DIR must name tests/fixtures"
#endif

/* ---- a loopback capture server: records each request, answers with a canned body ---- */

#define CAPTURE_MAX 2

struct capture {
    int fd;
    int port;
    int n;                          /* requests to serve */
    pthread_t thread;
    const char *bodies[CAPTURE_MAX];
    char request[CAPTURE_MAX][8192];
};

static const char listing_done[] = "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>";

static void *serve(void *arg)
{
    struct capture *c = arg;
    for (int i = 0; i < c->n; i++) {
        int conn = accept(c->fd, NULL, NULL);
        if (conn < 0)
            return NULL;
        char *req = c->request[i];
        size_t len = 0;
        while (len < sizeof c->request[i] - 1 && !strstr(req, "\r\n\r\n")) {
            ssize_t n = read(conn, req + len, sizeof c->request[i] - 1 - len);
            if (n <= 0)
                break;
            len += (size_t)n;
            req[len] = '\0';
        }
        const char *body = c->bodies[i] ? c->bodies[i] : listing_done;
        char reply[1024];
        int n = snprintf(reply, sizeof reply,
                         "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                         strlen(body), body);
        ssize_t w = write(conn, reply, (size_t)n);
        (void)w;
        close(conn);
    }
    return NULL;
}

static void capture_start(struct capture *c, int n, const char *first_body)
{
    test_no_proxy();
    memset(c, 0, sizeof *c);
    c->n = n;
    c->bodies[0] = first_body;
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(c->fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(bind(c->fd, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(c->fd, 4), 0);
    socklen_t al = sizeof a;
    cr_assert_eq(getsockname(c->fd, (struct sockaddr *)&a, &al), 0);
    c->port = ntohs(a.sin_port);
    cr_assert_eq(pthread_create(&c->thread, NULL, serve, c), 0);
}

static void capture_wait(struct capture *c)
{
    pthread_join(c->thread, NULL);
    close(c->fd);
}

/* The Authorization header value of request i (cut out of c->request[i]). */
static const char *authorization_of(struct capture *c, int i)
{
    char *a = strstr(c->request[i], "\r\nAuthorization: ");
    cr_assert_not_null(a, "no Authorization header in:\n%s", c->request[i]);
    a += strlen("\r\nAuthorization: ");
    char *end = strstr(a, "\r\n");
    cr_assert_not_null(end);
    *end = '\0';
    return a;
}

/* The Authorization header the Python fixture computed for case name. */
static void expected(const char *name, char *out, size_t size)
{
    FILE *f = fopen(FIXTURES_DIR "/storage_sigv4_cases.txt", "r");
    cr_assert_not_null(f, "missing fixture: run /usr/bin/python3 tests/fixtures/storage_sigv4_make.py");
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        char *tab = strchr(line, '\t');
        if (line[0] == '#' || !tab)
            continue;
        *tab = '\0';
        if (strcmp(line, name) == 0) {
            tab[1 + strcspn(tab + 1, "\n")] = '\0';
            snprintf(out, size, "%s", tab + 1);
            found = true;
        }
    }
    fclose(f);
    cr_assert(found, "no case %s in the fixture", name);
}

static struct http_client *client_to(const struct capture *c, const char *host, struct http_options *o)
{
    static char connect_to[128];
    snprintf(connect_to, sizeof connect_to, "%s:80:127.0.0.1:%d", host, c->port);
    http_options_default(o);
    o->max_attempts = 1;
    o->connect_to = connect_to;
    struct http_client *h;
    struct err e = {0};
    cr_assert_eq(http_client_new(o, &h, &e), ERR_OK, "%s", e.msg);
    return h;
}

/* ---- SHA-256 (FIPS 180-2 examples) ---- */

Test(sigv4, sha256_of_the_empty_payload_is_the_header_s3_expects)
{
    char hex[65];
    sha256_hex("", 0, hex);
    cr_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

Test(sigv4, sha256_matches_the_fips_examples)
{
    char hex[65];
    sha256_hex("abc", 3, hex);
    cr_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256_hex(two, strlen(two), hex);
    cr_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

Test(sigv4, sha256_of_a_million_a_fed_in_odd_pieces)
{
    struct sha256 s;
    sha256_init(&s);
    char chunk[997];
    memset(chunk, 'a', sizeof chunk);
    size_t left = 1000000;
    while (left > 0) {
        size_t n = left < sizeof chunk ? left : sizeof chunk;
        sha256_update(&s, chunk, n);
        left -= n;
    }
    unsigned char d[32];
    sha256_final(&s, d);
    char hex[65];
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    cr_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* ---- canonical query strings ---- */

Test(sigv4, query_parameters_are_sorted_by_name_then_value)
{
    struct s3_param p[] = {{"Param2", "value2"}, {"Param1", "value1"}, {"a", "2"}, {"a", "1"}};
    char *q = s3_query_build(p, 4);
    cr_assert_str_eq(q, "Param1=value1&Param2=value2&a=1&a=2");
    free(q);
}

Test(sigv4, query_names_and_values_are_uri_encoded_with_upper_case_hex)
{
    struct s3_param p[] = {{"prefix", "csv/dev/part 1+é"}, {"continuation-token", "ab/c+d="}, {"empty", NULL}};
    char *q = s3_query_build(p, 3);
    cr_assert_str_eq(q, "continuation-token=ab%2Fc%2Bd%3D&empty=&prefix=csv%2Fdev%2Fpart%201%2B%C3%A9");
    free(q);
}

Test(sigv4, object_keys_keep_their_slashes_and_encode_the_rest)
{
    char *k = s3_uri_encode("a b/c~d_e-f.g/h*i", true);
    cr_assert_str_eq(k, "a%20b/c~d_e-f.g/h%2Ai");
    free(k);
}

/* ---- what libcurl signs for the requests we build ---- */

static void check_vanilla(const char *name, const char *query)
{
    struct capture c;
    capture_start(&c, 1, NULL);
    struct http_options o;
    struct http_client *h = client_to(&c, "example.amazonaws.com", &o);
    char url[256];
    snprintf(url, sizeof url, "http://example.amazonaws.com/%s%s", query[0] ? "?" : "", query);
    const char *headers[] = {"X-Amz-Date: 20150830T123600Z"};
    struct http_request rq = {.url = url, .headers = headers, .n_headers = 1,
                              .aws_sigv4 = "aws:amz:us-east-1:service", .user = "AKIDEXAMPLE",
                              .password = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"};
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(http_get_mem(h, &rq, &r, &e), ERR_OK, "%s", e.msg);
    char want[512];
    expected(name, want, sizeof want);
    capture_wait(&c);
    cr_assert_str_eq(authorization_of(&c, 0), want);
    http_result_free(&r);
    http_client_free(h);
}

Test(sigv4, get_vanilla_signs_as_aws_published)
{
    check_vanilla("get-vanilla", "");
}

Test(sigv4, get_vanilla_query_order_key_case_signs_as_aws_published_once_sorted)
{
    struct s3_param p[] = {{"Param2", "value2"}, {"Param1", "value1"}};
    char *q = s3_query_build(p, 2);
    check_vanilla("get-vanilla-query-order-key-case", q);
    free(q);
}

Test(sigv4, s3_list_objects_doc_example_signs_as_aws_published)
{
    struct capture c;
    capture_start(&c, 1, NULL);
    struct http_options o;
    struct http_client *h = client_to(&c, "examplebucket.s3.amazonaws.com", &o);
    struct s3_param p[] = {{"prefix", "J"}, {"max-keys", "2"}};
    char *q = s3_query_build(p, 2);
    char url[256], sha[128], hex[65];
    snprintf(url, sizeof url, "http://examplebucket.s3.amazonaws.com/?%s", q);
    sha256_hex("", 0, hex);
    snprintf(sha, sizeof sha, "x-amz-content-sha256: %s", hex);
    const char *headers[] = {sha, "X-Amz-Date: 20130524T000000Z"};
    struct http_request rq = {.url = url, .headers = headers, .n_headers = 2, .aws_sigv4 = "aws:amz:us-east-1:s3",
                              .user = "AKIAIOSFODNN7EXAMPLE", .password = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"};
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(http_get_mem(h, &rq, &r, &e), ERR_OK, "%s", e.msg);
    char want[512];
    expected("s3-doc-list-objects", want, sizeof want);
    capture_wait(&c);
    cr_assert_str_eq(authorization_of(&c, 0), want);
    http_result_free(&r);
    http_client_free(h);
    free(q);
}

static struct s3_client *s3_to(const struct capture *c)
{
    struct http_options o;
    http_client_free(client_to(c, "s3.example.test", &o));
    struct s3_config cfg = {.endpoint = "http://s3.example.test", .region = "eu-west-1",
                            .access_key = "AKIAIOSFODNN7EXAMPLE",
                            .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                            .session_token = "FQoGZXIvYXdzEXAMPLE+token/with=chars",
                            .fixed_date = "20130524T000000Z", .max_keys = 2};
    struct s3_client *s;
    struct err e = {0};
    cr_assert_eq(s3_client_new(&cfg, &o, &s, &e), ERR_OK, "%s", e.msg);
    return s;
}

Test(sigv4, s3_get_object_with_a_session_token_signs_as_python_computes)
{
    struct capture c;
    capture_start(&c, 1, NULL);
    struct s3_client *s = s3_to(&c);
    struct http_result r;
    struct err e = {0};
    cr_assert_eq(s3_get_mem(s, "my-bucket", "csv/dev/part 1+2=\xc3\xa9.csv", &r, &e), ERR_OK, "%s", e.msg);
    char want[512];
    expected("traind-get-object", want, sizeof want);
    capture_wait(&c);
    cr_assert_not_null(strstr(c.request[0], "\r\nx-amz-content-sha256: "
                                            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\r\n"));
    cr_assert_not_null(strstr(c.request[0], "\r\nx-amz-security-token: FQoGZXIvYXdzEXAMPLE+token/with=chars\r\n"));
    cr_assert_str_eq(authorization_of(&c, 0), want);
    http_result_free(&r);
    s3_client_free(s);
}

Test(sigv4, s3_list_objects_v2_pages_sign_as_python_computes)
{
    struct capture c;
    capture_start(&c, 2, "<ListBucketResult><IsTruncated>true</IsTruncated>"
                         "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
                         "</ListBucketResult>");
    struct s3_client *s = s3_to(&c);
    struct s3_listing l;
    struct err e = {0};
    cr_assert_eq(s3_list(s, "my-bucket", "csv/dev/", "part *.csv", &l, &e), ERR_OK, "%s", e.msg);
    capture_wait(&c);
    cr_assert(strncmp(c.request[1], "GET /my-bucket/?continuation-token=1ueGcxLPRx1Tr%2FXYExHnhbYLgveDs2J"
                                    "%2Fwm36Hy4vbOwM%3D&list-type=2&max-keys=2&prefix=csv%2Fdev%2Fpart%20 ",
                      strlen("GET /my-bucket/?continuation-token=1ueGcxLPRx1Tr%2FXYExHnhbYLgveDs2J"
                             "%2Fwm36Hy4vbOwM%3D&list-type=2&max-keys=2&prefix=csv%2Fdev%2Fpart%20 ")) == 0,
              "%s", c.request[1]);
    char want[512];
    expected("traind-list-objects-v2-first-page", want, sizeof want);
    cr_assert_str_eq(authorization_of(&c, 0), want);
    expected("traind-list-objects-v2", want, sizeof want);
    cr_assert_str_eq(authorization_of(&c, 1), want);
    s3_listing_free(&l);
    s3_client_free(s);
}
