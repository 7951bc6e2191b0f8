/* test_init_from.c — init {"from": URL}: a .safetensors file read under the rules of data URLs. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../storage/tmpdir.h"
#include "backend.h"
#include "init_from.h"
#include "spec.h"

static char *root, *outside;   /* the one data root, and a folder beside it */

static void copy_fixture(const char *dir, const char *name)
{
    FILE *f = fopen(FIXTURES_DIR "/../integration/init_linear.safetensors", "rb");
    cr_assert_not_null(f);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    tmp_write_n(dir, name, buf, n);
}

static void setup(void)
{
    root = tmp_make();
    outside = tmp_make();
    copy_fixture(root, "in.safetensors");
    copy_fixture(outside, "out.safetensors");
}

static void teardown(void)
{
    tmp_remove(root);   /* and frees it */
    tmp_remove(outside);
}

TestSuite(init_from, .init = setup, .fini = teardown);

/* Loads init.from url into the linear model of init_linear.safetensors (8 features, float32). */
static int load(const char *url, struct err *e)
{
    char text[1024];
    snprintf(text, sizeof text, "{\"data\":{\"train\":\"d/*.csv\"},\"iterations\":1,\"dtype\":\"float32\","
             "\"init\":{\"from\":\"%s\"}}", url);
    json_t *j = json_loads(text, 0, NULL);
    struct job_spec *s;
    struct spec_error se;
    cr_assert_eq(spec_parse(j, &s, &se), 0, "%s: %s", se.field, se.message);
    json_decref(j);
    struct nn_model *m;
    cr_assert_eq(nn_linear_regression(be_cpu(), TENSOR_F32, 8, &m, e), 0, "%s", e->msg);
    const char *roots[] = {root};
    struct init_from_access acc = {.data_roots = roots, .n_data_roots = 1};
    int rc = init_from_load(s, -1, &acc, m, e);
    nn_model_free(m);
    spec_free(s);
    return rc;
}

/* The message past "init.from URL: ", which names the file asked for. */
static const char *reason(const struct err *e)
{
    const char *p = strstr(e->msg, ".safetensors");
    return p ? p + strlen(".safetensors") : e->msg;
}

Test(init_from, a_file_under_a_data_root_loads)
{
    char url[512];
    struct err e = {0};
    snprintf(url, sizeof url, "file://%s/in.safetensors", root);
    cr_assert_eq(load(url, &e), ERR_OK, "%s", e.msg);
}

Test(init_from, outside_the_data_roots_a_file_that_exists_fails_as_one_that_does_not)
{
    char there[512], gone[512];
    struct err e1 = {0}, e2 = {0};
    snprintf(there, sizeof there, "file://%s/out.safetensors", outside);
    snprintf(gone, sizeof gone, "file://%s/gone.safetensors", outside);
    cr_expect_eq(load(there, &e1), ERR_AUTH, "%s", e1.msg);
    cr_expect_eq(load(gone, &e2), ERR_AUTH, "%s", e2.msg);
    cr_expect_str_eq(reason(&e1), reason(&e2));
}

Test(init_from, a_path_that_climbs_out_of_the_data_root_is_outside_it)
{
    char url[1024];
    struct err e = {0};
    snprintf(url, sizeof url, "%s/../%s/out.safetensors", root, strrchr(outside, '/') + 1);
    cr_expect_eq(load(url, &e), ERR_AUTH, "%s", e.msg);
}
