/*
 * test_objstore.c — datasets end to end over s3:// (s3rver) and http(s):// (fail.js):
 * the batches equal those of the same CSV files read through file://, and the
 * partition cache serves a second open without reading any body again.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "store.h"
#include "test_servers.h"

#define N_PARTS 5
#define BATCH 7

static struct test_server srv;
static char parts[N_PARTS][512];   /* local paths, also served */
static size_t total_rows;

/* Partitions of different lengths (3, 4, 5, 6, 7 rows) so batches of 7 span them. */
static void write_parts(void)
{
    total_rows = 0;
    for (int p = 0; p < N_PARTS; p++) {
        char text[1024] = "fare,lat,lon\n";
        for (int r = 0; r < 3 + p; r++) {
            char row[64];
            snprintf(row, sizeof row, "%d.%d,%d.25,-%d.5\n", 10 * p + r, r, p, r);
            strcat(text, row);
            total_rows++;
        }
        char rel[64];
        snprintf(rel, sizeof rel, "csv/dev/part-%05d.csv", p);
        cr_assert(test_server_write(&srv, rel, text, strlen(text)));
        snprintf(parts[p], sizeof parts[p], "%s/%s", srv.tmp, rel);
    }
    const char *other = "x\n";
    cr_assert(test_server_write(&srv, "csv/dev/other.csv", other, strlen(other)));
}

static void start_s3(void)
{
    cr_assert(test_server_tmpdir(&srv));
    write_parts();
    static char dir[512], puts_[N_PARTS][1024];
    snprintf(dir, sizeof dir, "%s/s3", srv.tmp);
    const char *args[6 + 2 * N_PARTS] = {"--dir", dir, "--bucket", "bk"};
    size_t n = 4;
    for (int p = 0; p < N_PARTS; p++) {
        snprintf(puts_[p], sizeof puts_[p], "bk/csv/dev/part-%05d.csv=%s", p, parts[p]);
        args[n++] = "--put";
        args[n++] = puts_[p];
    }
    args[n] = NULL;
    TEST_SERVER_START_OR_SKIP(&srv, "s3.js", args);
    test_s3_credentials();
}

static void start_http(void)
{
    cr_assert(test_server_tmpdir(&srv));
    write_parts();
    const char *list = "# the dev partitions, relative to this file\npart-00003.csv\n\npart-00000.csv\r\n"
                       "part-00004.csv\n  part-00001.csv\npart-00002.csv\n";
    cr_assert(test_server_write(&srv, "csv/dev/parts.list", list, strlen(list)));
    const char *args[] = {"--root", srv.tmp, NULL};
    TEST_SERVER_START_OR_SKIP(&srv, "fail.js", args);
}

static void teardown(void)
{
    test_server_stop(&srv);
}

TestSuite(objstore, .fini = teardown);

static struct dataset_config config(const char *url, const struct store_remote *remote)
{
    return (struct dataset_config){.url = url, .remote = remote, .header = DATASET_HEADER_AUTO,
                                   .label_column = 0, .dtype = STORE_F64, .batch_size = BATCH};
}

/* One epoch's batches, concatenated: rows x 3 doubles. */
static double *read_epoch(const struct dataset_config *c, size_t *rows_out)
{
    struct dataset *ds;
    struct err e = {0};
    cr_assert_eq(dataset_open(c, &ds, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(dataset_num_features(ds), 2);
    double *all = calloc(total_rows * 3, sizeof *all);
    double *batch = malloc(dataset_batch_bytes(ds));
    cr_assert(all && batch);
    size_t got = 0;
    for (size_t k = 0; k < (total_rows + BATCH - 1) / BATCH; k++) {
        size_t rows;
        struct dataset_cursor at;
        cr_assert_eq(dataset_next_batch(ds, batch, &rows, &at, &e), ERR_OK, "%s", e.msg);
        cr_assert_eq(at.epoch, 0);
        cr_assert_leq(got + rows, total_rows);
        memcpy(all + got * 3, batch, rows * 3 * sizeof *batch);
        got += rows;
    }
    free(batch);
    dataset_close(ds);
    *rows_out = got;
    return all;
}

static void assert_same_as_file(const struct dataset_config *remote)
{
    char url[600];
    snprintf(url, sizeof url, "file://%s/csv/dev/part*.csv", srv.tmp);
    struct dataset_config local = config(url, NULL);
    size_t n_local, n_remote;
    double *want = read_epoch(&local, &n_local);
    double *got = read_epoch(remote, &n_remote);
    cr_assert_eq(n_local, total_rows);
    cr_assert_eq(n_remote, n_local);
    cr_assert_eq(memcmp(got, want, n_local * 3 * sizeof *got), 0);
    free(want);
    free(got);
}

Test(objstore, an_s3_dataset_reads_the_same_batches_as_file)
{
    start_s3();
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", srv.port);
    struct store_remote r = {.s3_endpoint = endpoint, .s3_region = "us-east-1"};
    struct dataset_config c = config("s3://bk/csv/dev/part*.csv", &r);
    assert_same_as_file(&c);
}

Test(objstore, an_s3_dataset_through_the_cache_reads_the_same_batches_twice)
{
    start_s3();
    char endpoint[64], cache[600];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", srv.port);
    snprintf(cache, sizeof cache, "%s/cache", srv.tmp);
    struct store_remote r = {.s3_endpoint = endpoint, .cache_dir = cache};
    struct dataset_config c = config("s3://bk/csv/dev/part*.csv", &r);
    assert_same_as_file(&c);
    assert_same_as_file(&c);
}

Test(objstore, an_s3_glob_matching_nothing_is_data_unavailable_naming_the_url)
{
    start_s3();
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", srv.port);
    struct store_remote r = {.s3_endpoint = endpoint};
    struct dataset_config c = config("s3://bk/csv/test/part*.csv", &r);
    struct dataset *ds = NULL;
    struct err e = {0};
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_DATA_UNAVAILABLE);
    cr_assert_not_null(strstr(e.msg, "s3://bk/csv/test/part*.csv"), "%s", e.msg);
}

Test(objstore, a_missing_bucket_is_data_unavailable)
{
    start_s3();
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", srv.port);
    struct store_remote r = {.s3_endpoint = endpoint};
    struct dataset_config c = config("s3://nobucket/csv/dev/part*.csv", &r);
    struct dataset *ds = NULL;
    struct err e = {0};
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_DATA_UNAVAILABLE);
    cr_assert_not_null(strstr(e.msg, "NoSuchBucket"), "%s", e.msg);
}

Test(objstore, an_http_object_is_a_one_partition_dataset)
{
    start_http();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ok/csv/dev/part-00002.csv", srv.port);
    struct dataset_config c = config(url, NULL);
    struct dataset *ds;
    struct err e = {0};
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(dataset_num_partitions(ds), 1);
    cr_assert_str_eq(dataset_partition_name(ds, 0), "part-00002.csv");
    double batch[BATCH * 3];
    size_t rows;
    cr_assert_eq(dataset_next_batch(ds, batch, &rows, NULL, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(rows, 5);
    cr_assert_float_eq(batch[0], 20.0, 0);      /* "20.0,2.25,-0.5" */
    cr_assert_float_eq(batch[1], 2.25, 0);
    cr_assert_float_eq(batch[2], -0.5, 0);
    dataset_close(ds);
}

Test(objstore, an_http_listing_file_reads_the_same_batches_as_file)
{
    start_http();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ok/csv/dev/parts.list", srv.port);
    struct dataset_config c = config(url, NULL);
    assert_same_as_file(&c);
}

Test(objstore, a_second_open_through_the_cache_reads_no_body_again)
{
    start_http();
    char url[128], cache[600];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ok/csv/dev/parts.list", srv.port);
    snprintf(cache, sizeof cache, "%s/cache", srv.tmp);
    struct store_remote r = {.cache_dir = cache};
    struct dataset_config c = config(url, &r);
    assert_same_as_file(&c);
    cr_assert_eq(test_server_count_method(&srv, "/ok/csv/dev/part-00003.csv", "GET"), 1);
    assert_same_as_file(&c);
    for (int p = 0; p < N_PARTS; p++) {
        char path[64];
        snprintf(path, sizeof path, "/ok/csv/dev/part-%05d.csv", p);
        cr_assert_eq(test_server_count_method(&srv, path, "GET"), 1, "%s was downloaded again", path);
    }
}

Test(objstore, a_changed_object_is_downloaded_again_despite_the_cache)
{
    start_http();
    char url[128], cache[600];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ok/csv/dev/part-00000.csv", srv.port);
    snprintf(cache, sizeof cache, "%s/cache", srv.tmp);
    struct store_remote r = {.cache_dir = cache};
    struct dataset_config c = config(url, &r);
    struct dataset *ds;
    struct err e = {0};
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_OK, "%s", e.msg);
    dataset_close(ds);
    const char *text = "fare,lat,lon\n1,2,3\n4,5,6\n7,8,9\n10,11,12\n";   /* a new size, so a new ETag */
    cr_assert(test_server_write(&srv, "csv/dev/part-00000.csv", text, strlen(text)));
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_OK, "%s", e.msg);
    double batch[BATCH * 3];
    size_t rows;
    cr_assert_eq(dataset_next_batch(ds, batch, &rows, NULL, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(rows, 4);
    dataset_close(ds);
    cr_assert_eq(test_server_count_method(&srv, "/ok/csv/dev/part-00000.csv", "GET"), 2);
}

Test(objstore, a_partition_that_is_gone_fails_the_open_with_data_unavailable)
{
    start_http();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ok/csv/dev/part-00099.csv", srv.port);
    struct dataset_config c = config(url, NULL);
    struct dataset *ds = NULL;
    struct err e = {0};
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_DATA_UNAVAILABLE);
    cr_assert_not_null(strstr(e.msg, "part-00099.csv"), "%s", e.msg);
}

Test(objstore, a_forbidden_partition_fails_the_open_with_auth_failed)
{
    start_http();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/status-403/csv/dev/part-00000.csv", srv.port);
    struct dataset_config c = config(url, NULL);
    struct dataset *ds = NULL;
    struct err e = {0};
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_AUTH);
}

Test(objstore, http_urls_with_credentials_are_refused)
{
    struct dataset_config c = config("http://user:secret@127.0.0.1:9/part-0.csv", NULL);
    struct dataset *ds = NULL;
    struct err e = {0};
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_INVALID_ARG);
    cr_assert_null(strstr(e.msg, "secret"), "%s", e.msg);
}

Test(objstore, an_s3_url_without_a_key_or_glob_is_invalid)
{
    struct store_remote r = {.s3_endpoint = "http://127.0.0.1:9", .s3_anonymous = true};
    struct dataset_config c = config("s3://bucket-only", &r);
    struct dataset *ds = NULL;
    struct err e = {0};
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_INVALID_ARG);
}

/* Bytes of the regular files in dir, but for dot files (the eviction lock, dir/.evict). */
static unsigned long long dir_bytes(const char *dir, int *files)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "find '%s' -type f ! -name '.*' -printf '%%s\\n'", dir);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    unsigned long long total = 0, n;
    *files = 0;
    while (fscanf(p, "%llu", &n) == 1) {
        total += n;
        (*files)++;
    }
    pclose(p);
    return total;
}

Test(objstore, the_cache_stays_under_its_byte_limit_and_still_serves_every_partition)
{
    start_http();
    char url[128], cache[600];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ok/csv/dev/parts.list", srv.port);
    snprintf(cache, sizeof cache, "%s/cache", srv.tmp);
    /* Partitions are 60-140 bytes: 250 bytes hold about two of them. */
    struct store_remote r = {.cache_dir = cache, .cache_limit = 250};
    struct dataset_config c = config(url, &r);
    assert_same_as_file(&c);
    int files;
    unsigned long long bytes = dir_bytes(cache, &files);
    cr_assert_leq(bytes, 250, "%llu bytes in %d files", bytes, files);
    cr_assert_geq(files, 1);
    /* Evicted partitions come back by download, and the cache still keeps its limit. */
    assert_same_as_file(&c);
    bytes = dir_bytes(cache, &files);
    cr_assert_leq(bytes, 250, "%llu bytes in %d files", bytes, files);
}

Test(objstore, a_partition_larger_than_the_cache_limit_is_still_served)
{
    start_http();
    char url[128], cache[600];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ok/csv/dev/part-00004.csv", srv.port);
    snprintf(cache, sizeof cache, "%s/cache", srv.tmp);
    struct store_remote r = {.cache_dir = cache, .cache_limit = 1};
    struct dataset_config c = config(url, &r);
    struct dataset *ds;
    struct err e = {0};
    cr_assert_eq(dataset_open(&c, &ds, &e), ERR_OK, "%s", e.msg);
    double batch[BATCH * 3];
    size_t rows;
    cr_assert_eq(dataset_next_batch(ds, batch, &rows, NULL, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(rows, 7);
    dataset_close(ds);
}

/* dataset_open's error for c, asserting it failed with code (a static buffer). */
static const char *open_error(const struct dataset_config *c, int code)
{
    static struct err e;
    memset(&e, 0, sizeof e);
    struct dataset *ds = NULL;
    int rc = dataset_open(c, &ds, &e);
    if (rc == ERR_OK)
        dataset_close(ds);
    cr_assert_eq(rc, code, "%d: %s", rc, e.msg);
    return e.msg;
}

Test(objstore, a_listing_file_naming_more_objects_than_list_max_keys_is_invalid_data)
{
    start_http();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ok/csv/dev/parts.list", srv.port);
    struct store_remote r = {.list = {.max_keys = N_PARTS - 1}};
    struct dataset_config c = config(url, &r);
    const char *msg = open_error(&c, ERR_INVALID_DATA);
    cr_expect_not_null(strstr(msg, url), "%s", msg);
    cr_expect_not_null(strstr(msg, "more than 4 objects (--list-max-keys)"), "%s", msg);
    r.list.max_keys = N_PARTS;
    open_error(&c, ERR_OK);
}

Test(objstore, a_listing_file_longer_than_list_max_bytes_is_invalid_data)
{
    start_http();
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ok/csv/dev/parts.list", srv.port);
    struct store_remote r = {.list = {.max_bytes = 40}};
    struct dataset_config c = config(url, &r);
    const char *msg = open_error(&c, ERR_INVALID_DATA);
    cr_expect_not_null(strstr(msg, url), "%s", msg);
    cr_expect_not_null(strstr(msg, "larger than 40 bytes (--list-max-bytes)"), "%s", msg);
}

Test(objstore, an_s3_listing_past_list_max_keys_or_list_max_bytes_is_invalid_data)
{
    start_s3();
    char endpoint[64];
    snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", srv.port);
    struct store_remote r = {.s3_endpoint = endpoint, .s3_region = "us-east-1", .list = {.max_keys = N_PARTS - 1}};
    struct dataset_config c = config("s3://bk/csv/dev/part*.csv", &r);
    const char *msg = open_error(&c, ERR_INVALID_DATA);
    cr_expect_not_null(strstr(msg, "s3://bk/csv/dev/part"), "%s", msg);
    cr_expect_not_null(strstr(msg, "more than 4 objects (--list-max-keys)"), "%s", msg);
    r.list = (struct store_list_limits){.max_bytes = 200};
    msg = open_error(&c, ERR_INVALID_DATA);
    cr_expect_not_null(strstr(msg, "s3://bk/csv/dev/part"), "%s", msg);
    cr_expect_not_null(strstr(msg, "larger than 200 bytes (--list-max-bytes)"), "%s", msg);
    r.list = (struct store_list_limits){.max_keys = N_PARTS};
    open_error(&c, ERR_OK);
}
