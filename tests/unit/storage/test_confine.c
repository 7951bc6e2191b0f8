/* test_confine.c — a listed file read later: copies that survive the file changing, and confinement at open time. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "beneath.h"
#include "store.h"
#include "tmpdir.h"

TMP_SUITE(confine);

/* Lists url under the one root and expects a single match, left in *l with *u. */
static void list_one(const char *root, const char *url, struct store_url *u, struct store_listing *l)
{
    struct err e = {0};
    const char *roots[] = {root};
    struct store_access acc = {roots, 1, NULL};
    cr_assert_eq(store_url_parse(url, u, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(store_list(u, &acc, l, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(l->n, 1);
}

static void truncate_to(const char *name, off_t len)
{
    char *p = tmp_path(dir, name);
    cr_assert_eq(truncate(p, len), 0, "truncate %s", p);
    free(p);
}

/* dir/part-0.csv with a page and more of rows (so that a truncation drops whole pages), listed. */
static void write_and_list_rows(struct store_url *u, struct store_listing *l)
{
    size_t n = 3 * 4096;
    char *text = malloc(n);
    for (size_t i = 0; i < n; i += 4)
        memcpy(text + i, "1,2\n", 4);
    tmp_write_n(dir, "part-0.csv", text, n);
    free(text);
    char url[4200];
    snprintf(url, sizeof url, "%s/part*.csv", dir);
    list_one(dir, url, u, l);
}

Test(confine, bytes_read_stay_readable_when_the_file_is_truncated_afterwards)
{
    struct store_url u;
    struct store_listing l;
    write_and_list_rows(&u, &l);
    struct store_blob b;
    struct err e = {0};
    cr_assert_eq(store_map(&u, &l.v[0], &b, &e), ERR_OK, "%s", e.msg);
    truncate_to("part-0.csv", 0);
    unsigned sum = 0;
    for (size_t i = 0; i < b.len; i++)   /* a mapping of the file would raise SIGBUS here */
        sum += (unsigned char)b.data[i];
    cr_expect_eq(b.len, 3 * 4096);
    cr_expect_eq(sum, (unsigned)(3 * 1024) * ('1' + ',' + '2' + '\n'));
    store_unmap(&b);
    store_listing_free(&l);
    store_url_free(&u);
}

Test(confine, a_file_that_shrank_since_listing_fails_the_read_with_invalid_data_naming_it)
{
    struct store_url u;
    struct store_listing l;
    write_and_list_rows(&u, &l);
    truncate_to("part-0.csv", 4096);
    struct store_blob b;
    struct err e = {0};
    cr_expect_eq(store_map(&u, &l.v[0], &b, &e), ERR_INVALID_DATA, "%s", e.msg);
    cr_expect_not_null(strstr(e.msg, "part-0.csv"), "%s", e.msg);
    cr_expect_not_null(strstr(e.msg, "changed size"), "%s", e.msg);
    store_listing_free(&l);
    store_url_free(&u);
}

Test(confine, a_file_that_vanished_since_listing_fails_the_read_with_data_unavailable)
{
    struct store_url u;
    struct store_listing l;
    write_and_list_rows(&u, &l);
    char *p = tmp_path(dir, "part-0.csv");
    cr_assert_eq(unlink(p), 0);
    free(p);
    struct store_blob b;
    struct err e = {0};
    cr_expect_eq(store_map(&u, &l.v[0], &b, &e), ERR_DATA_UNAVAILABLE, "%s", e.msg);
    cr_expect_not_null(strstr(e.msg, "part-0.csv"), "%s", e.msg);
    store_listing_free(&l);
    store_url_free(&u);
}

/* Reads the one file listed under dir/data as url after swap(), which puts a symlink out of the root in
   its way: the read must fail as for a file that is gone, never show the secret's bytes. */
static void expect_swap_refused(const char *url, void (*swap)(void))
{
    tmp_mkdir(dir, "secret");
    tmp_write(dir, "secret/part-0.csv", "7,7\n");
    char root[4200];
    snprintf(root, sizeof root, "%s/data", dir);
    struct store_url u;
    struct store_listing l;
    list_one(root, url, &u, &l);
    swap();
    struct store_blob b = {0};
    struct err e = {0};
    int rc = store_map(&u, &l.v[0], &b, &e);
    cr_expect_eq(rc, ERR_DATA_UNAVAILABLE, "read %.*s: %s", (int)b.len, b.data ? b.data : "", e.msg);
    if (rc == ERR_OK)
        store_unmap(&b);
    store_listing_free(&l);
    store_url_free(&u);
}

/* Replaces dir/link_name by a symlink to dir/target_name (moved aside to dir/data/old when a folder). */
static void swap_link(const char *link_name, const char *target_name)
{
    char *target = tmp_path(dir, target_name), *link = tmp_path(dir, link_name), *old = tmp_path(dir, "data/old");
    cr_assert_eq(rename(link, old), 0);
    cr_assert_eq(symlink(target, link), 0);
    free(target);
    free(link);
    free(old);
}

static void swap_file(void)
{
    swap_link("data/part-0.csv", "secret/part-0.csv");
}

static void swap_folder(void)
{
    swap_link("data/dev", "secret");
}

Test(confine, a_symlink_swapped_in_after_listing_is_not_followed_out_of_the_root)
{
    tmp_mkdir(dir, "data");
    tmp_write(dir, "data/part-0.csv", "1,2\n");
    char url[4200];
    snprintf(url, sizeof url, "%s/data/part*.csv", dir);
    expect_swap_refused(url, swap_file);
}

Test(confine, a_directory_swapped_for_a_symlink_after_listing_is_not_followed_out_of_the_root)
{
    tmp_mkdir(dir, "data");
    tmp_mkdir(dir, "data/dev");
    tmp_write(dir, "data/dev/part-0.csv", "1,2\n");
    char url[4200];
    snprintf(url, sizeof url, "%s/data/dev/part*.csv", dir);
    expect_swap_refused(url, swap_folder);
}

/* The error's code and message for listing url under root. */
static int list_error(const char *root, const char *url, char *msg, size_t cap)
{
    struct err e = {0};
    const char *roots[] = {root};
    struct store_access acc = {roots, 1, NULL};
    struct store_url u;
    struct store_listing l;
    cr_assert_eq(store_url_parse(url, &u, &e), ERR_OK, "%s", e.msg);
    int rc = store_list(&u, &acc, &l, &e);
    if (rc == ERR_OK)
        store_listing_free(&l);
    store_url_free(&u);
    snprintf(msg, cap, "%s", e.msg);
    return rc;
}

Test(confine, a_missing_path_outside_the_roots_gets_the_same_error_as_an_existing_one)
{
    tmp_mkdir(dir, "data");
    tmp_mkdir(dir, "secret");
    tmp_write(dir, "secret/part-0.csv", "1,2\n");
    char root[4200], there[4200], missing[4200], m1[256], m2[256];
    snprintf(root, sizeof root, "%s/data", dir);
    snprintf(there, sizeof there, "%s/secret/part*.csv", dir);
    snprintf(missing, sizeof missing, "%s/nothing/part*.csv", dir);
    int rc1 = list_error(root, there, m1, sizeof m1);
    int rc2 = list_error(root, missing, m2, sizeof m2);
    cr_expect_eq(rc1, ERR_AUTH, "%s", m1);
    cr_expect_eq(rc2, rc1, "%s vs %s", m2, m1);
    cr_expect_str_eq(m2, m1);
}

Test(confine, a_missing_directory_below_a_root_is_data_unavailable)
{
    tmp_mkdir(dir, "data");
    char url[4200], msg[256];
    snprintf(url, sizeof url, "%s/data/nothing/part*.csv", dir);
    cr_expect_eq(list_error(dir, url, msg, sizeof msg), ERR_DATA_UNAVAILABLE, "%s", msg);
}

/* The walk of kernels without openat2, run here directly. */
Test(confine, the_walk_without_openat2_opens_plain_files_and_follows_no_symlink)
{
    tmp_mkdir(dir, "data");
    tmp_mkdir(dir, "data/dev");
    tmp_mkdir(dir, "secret");
    tmp_write(dir, "data/dev/part-0.csv", "1,2\n");
    tmp_write(dir, "secret/part-0.csv", "7,7\n");
    char *target = tmp_path(dir, "secret"), *link = tmp_path(dir, "data/out");
    cr_assert_eq(symlink(target, link), 0);
    char *ftarget = tmp_path(dir, "secret/part-0.csv"), *flink = tmp_path(dir, "data/dev/part-1.csv");
    cr_assert_eq(symlink(ftarget, flink), 0);
    char *root = tmp_path(dir, "data");
    int rootfd = open(root, O_PATH | O_DIRECTORY);
    cr_assert_geq(rootfd, 0);
    int fd = beneath_walk(rootfd, "dev/part-0.csv");
    cr_expect_geq(fd, 0, "%s", strerror(errno));
    if (fd >= 0)
        close(fd);
    errno = 0;
    cr_expect_eq(beneath_walk(rootfd, "out/part-0.csv"), -1);
    cr_expect_eq(errno, ENOTDIR, "%s", strerror(errno));
    errno = 0;
    cr_expect_eq(beneath_walk(rootfd, "dev/part-1.csv"), -1);
    cr_expect_eq(errno, ELOOP, "%s", strerror(errno));
    errno = 0;
    cr_expect_eq(beneath_walk(rootfd, "dev/../../secret/part-0.csv"), -1);
    cr_expect_eq(errno, EXDEV, "%s", strerror(errno));
    close(rootfd);
    free(root);
    free(target);
    free(link);
    free(ftarget);
    free(flink);
}
