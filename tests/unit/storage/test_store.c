/* test_store.c — URLs, glob listing sorted by name, and confinement of file reads to the data roots. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset.h"
#include "store.h"
#include "tmpdir.h"

TMP_SUITE(storage);

static int list(const char *url, const char *const *roots, size_t nroots, struct store_listing *l,
                struct err *e)
{
    struct store_url u;
    int rc = store_url_parse(url, &u, e);
    if (rc)
        return rc;
    struct store_access acc = {roots, nroots, NULL};
    rc = store_list(&u, &acc, l, e);
    store_url_free(&u);
    return rc;
}

static struct dataset_config config(const char *url, const char *const *roots, size_t nroots)
{
    struct dataset_config c = {.url = url, .data_roots = roots, .n_data_roots = nroots,
                               .header = DATASET_HEADER_AUTO, .dtype = STORE_F64, .batch_size = 4};
    return c;
}

static int open_code(const struct dataset_config *c, struct err *e)
{
    struct dataset *ds = NULL;
    int rc = dataset_open(c, &ds, e);
    dataset_close(ds);
    return rc;
}

Test(storage, url_splits_location_and_last_component_glob)
{
    struct store_url u;
    struct err e = {0};
    cr_assert_eq(store_url_parse("file:///data/csv/dev/part*.csv", &u, &e), ERR_OK, "%s", e.msg);
    cr_assert_str_eq(u.location, "/data/csv/dev");
    cr_assert_str_eq(u.pattern, "part*.csv");
    store_url_free(&u);
    cr_assert_eq(store_url_parse("rel/part-?.csv", &u, &e), ERR_OK);
    cr_assert_str_eq(u.location, "rel");
    cr_assert_str_eq(u.pattern, "part-?.csv");
    store_url_free(&u);
    cr_assert_eq(store_url_parse("part.csv", &u, &e), ERR_OK);
    cr_assert_str_eq(u.location, ".");
    store_url_free(&u);
}

Test(storage, glob_matches_regular_files_sorted_by_name)
{
    tmp_write(dir, "part-2.csv", "1\n");
    tmp_write(dir, "part-10.csv", "1\n");
    tmp_write(dir, "part-1.csv", "1\n");
    tmp_write(dir, "other.txt", "1\n");
    tmp_write(dir, ".part-0.csv", "1\n");
    tmp_mkdir(dir, "part-dir.csv");
    char url[4200];
    snprintf(url, sizeof url, "file://%s/part*.csv", dir);
    struct store_listing l;
    struct err e = {0};
    cr_assert_eq(list(url, NULL, 0, &l, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(l.n, 3);
    cr_assert_str_eq(l.v[0].name, "part-1.csv");
    cr_assert_str_eq(l.v[1].name, "part-10.csv");
    cr_assert_str_eq(l.v[2].name, "part-2.csv");
    store_listing_free(&l);
}

Test(storage, glob_question_mark_and_brackets)
{
    tmp_write(dir, "part-1.csv", "1\n");
    tmp_write(dir, "part-2.csv", "1\n");
    tmp_write(dir, "part-3.csv", "1\n");
    tmp_write(dir, "part-10.csv", "1\n");
    char url[4200];
    snprintf(url, sizeof url, "%s/part-[13].csv", dir);
    struct store_listing l;
    struct err e = {0};
    cr_assert_eq(list(url, NULL, 0, &l, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(l.n, 2);
    cr_assert_str_eq(l.v[1].name, "part-3.csv");
    store_listing_free(&l);
    snprintf(url, sizeof url, "%s/part-?.csv", dir);
    cr_assert_eq(list(url, NULL, 0, &l, &e), ERR_OK, "%s", e.msg);
    cr_assert_eq(l.n, 3);
    store_listing_free(&l);
}

Test(storage, relative_paths_resolve_from_the_working_directory)
{
    tmp_mkdir(dir, "data");
    tmp_write(dir, "data/part-0.csv", "1,2\n");
    cr_assert_eq(chdir(dir), 0);
    struct dataset_config c = config("data/part*.csv", NULL, 0);
    struct err e = {0};
    cr_assert_eq(open_code(&c, &e), ERR_OK, "%s", e.msg);
}

Test(storage, nothing_matching_is_data_unavailable_naming_the_url)
{
    tmp_write(dir, "part-0.csv", "1,2\n");
    char url[4200];
    snprintf(url, sizeof url, "%s/train*.csv", dir);
    struct dataset_config c = config(url, NULL, 0);
    struct err e = {0};
    cr_assert_eq(open_code(&c, &e), ERR_DATA_UNAVAILABLE, "%s", e.msg);
    cr_assert_not_null(strstr(e.msg, url), "%s", e.msg);
}

Test(storage, missing_directory_is_data_unavailable)
{
    char url[4200];
    snprintf(url, sizeof url, "%s/nope/part*.csv", dir);
    struct dataset_config c = config(url, NULL, 0);
    struct err e = {0};
    cr_assert_eq(open_code(&c, &e), ERR_DATA_UNAVAILABLE, "%s", e.msg);
}

Test(storage, files_inside_the_data_root_are_allowed)
{
    tmp_mkdir(dir, "data");
    tmp_write(dir, "data/part-0.csv", "1,2\n");
    char root[4200], url[4200];
    snprintf(root, sizeof root, "%s/data", dir);
    snprintf(url, sizeof url, "%s/data/part*.csv", dir);
    const char *roots[] = {"/nonexistent-root", root};
    struct dataset_config c = config(url, roots, 2);
    struct err e = {0};
    cr_assert_eq(open_code(&c, &e), ERR_OK, "%s", e.msg);
}

Test(storage, dotdot_escape_from_the_data_root_is_auth)
{
    tmp_mkdir(dir, "data");
    tmp_mkdir(dir, "secret");
    tmp_write(dir, "secret/part-0.csv", "1,2\n");
    char root[4200], url[4200];
    snprintf(root, sizeof root, "%s/data", dir);
    snprintf(url, sizeof url, "%s/data/../secret/part*.csv", dir);
    const char *roots[] = {root};
    struct dataset_config c = config(url, roots, 1);
    struct err e = {0};
    cr_assert_eq(open_code(&c, &e), ERR_AUTH, "%s", e.msg);
    cr_assert_not_null(strstr(e.msg, "path outside --data-root"), "%s", e.msg);
}

/* A daemon given no --data-root (its default) reads no local files at all, and says why. */
Test(storage, with_no_data_root_no_local_file_is_read)
{
    tmp_mkdir(dir, "data");
    tmp_write(dir, "data/part-0.csv", "1,2\n");
    char url[4200];
    snprintf(url, sizeof url, "%s/data/part*.csv", dir);
    const char *roots[] = {NULL};
    struct dataset_config c = config(url, roots, 0);
    struct err e = {0};
    cr_assert_eq(open_code(&c, &e), ERR_AUTH, "%s", e.msg);
    cr_expect_not_null(strstr(e.msg, "no --data-root was given, so traind reads no local files"), "%s", e.msg);
}

Test(storage, symlink_pointing_outside_the_data_root_is_auth)
{
    tmp_mkdir(dir, "data");
    tmp_mkdir(dir, "secret");
    tmp_write(dir, "data/part-0.csv", "1,2\n");
    tmp_write(dir, "secret/x.csv", "1,2\n");
    char *target = tmp_path(dir, "secret/x.csv"), *link = tmp_path(dir, "data/part-1.csv");
    cr_assert_eq(symlink(target, link), 0);
    free(target);
    free(link);
    char root[4200], url[4200];
    snprintf(root, sizeof root, "%s/data", dir);
    snprintf(url, sizeof url, "%s/data/part*.csv", dir);
    const char *roots[] = {root};
    struct dataset_config c = config(url, roots, 1);
    struct err e = {0};
    cr_assert_eq(open_code(&c, &e), ERR_AUTH, "%s", e.msg);
    cr_assert_not_null(strstr(e.msg, "part-1.csv"), "%s", e.msg);
}

Test(storage, sibling_directory_sharing_the_root_prefix_is_outside)
{
    tmp_mkdir(dir, "data");
    tmp_mkdir(dir, "data2");
    tmp_write(dir, "data2/part-0.csv", "1,2\n");
    char root[4200], url[4200];
    snprintf(root, sizeof root, "%s/data", dir);
    snprintf(url, sizeof url, "%s/data2/part*.csv", dir);
    const char *roots[] = {root};
    struct dataset_config c = config(url, roots, 1);
    struct err e = {0};
    cr_assert_eq(open_code(&c, &e), ERR_AUTH, "%s", e.msg);
}

Test(storage, symlinked_directory_pointing_outside_the_data_root_is_auth)
{
    tmp_mkdir(dir, "data");
    tmp_mkdir(dir, "secret");
    tmp_write(dir, "secret/part-0.csv", "1,2\n");
    char *target = tmp_path(dir, "secret"), *link = tmp_path(dir, "data/more");
    cr_assert_eq(symlink(target, link), 0);
    free(target);
    free(link);
    char root[4200], url[4200];
    snprintf(root, sizeof root, "%s/data", dir);
    snprintf(url, sizeof url, "%s/data/more/part*.csv", dir);
    const char *roots[] = {root};
    struct dataset_config c = config(url, roots, 1);
    struct err e = {0};
    cr_assert_eq(open_code(&c, &e), ERR_AUTH, "%s", e.msg);
}
