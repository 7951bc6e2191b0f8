/* test_snapshot.c — a job's checkpoint files: the run's metadata back from the header alone. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "be_cpu.h"
#include "snapshot.h"

static char dir[64];

static void make_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/traind-snapshot-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void)
{
    int removed;
    struct err e = {0};
    snapshot_sweep(dir, NULL, &removed, &e);
    rmdir(dir);
}

TestSuite(snapshot, .init = make_dir, .fini = remove_dir);

static struct nn_model *linear(void)
{
    struct err e = {0};
    struct nn_model *m;
    cr_assert_eq(nn_linear_regression(be_cpu(), TENSOR_F64, 8, &m, &e), 0, "%s", e.msg);
    return m;
}

Test(snapshot, peek_gives_the_metadata_save_wrote)
{
    struct err e = {0};
    struct nn_model *m = linear();
    char path[128];
    cr_assert_eq(snapshot_path(dir, 42, path, sizeof path, &e), 0);
    struct snapshot_meta in = {.job_id = "0123456789abcdef", .iterations = 42, .cursor = {3, 7},
                               .features = 8, .outputs = 1, .epoch_iterations = 11};
    cr_assert_eq(snapshot_save(path, m, NULL, &in, &e), 0, "%s", e.msg);
    struct snapshot_meta out;
    cr_assert_eq(snapshot_peek(path, &out, &e), 0, "%s", e.msg);
    cr_expect_str_eq(out.job_id, in.job_id);
    cr_expect_eq(out.iterations, 42);
    cr_expect_eq(out.cursor.epoch, 3);
    cr_expect_eq(out.cursor.batch, 7);
    cr_expect_eq(out.features, 8);
    cr_expect_eq(out.outputs, 1);
    cr_expect_eq(out.epoch_iterations, 11);
    nn_model_free(m);
}

Test(snapshot, peek_of_a_cut_file_fails_as_a_load_would)
{
    struct err e = {0};
    struct nn_model *m = linear();
    char path[128];
    cr_assert_eq(snapshot_path(dir, 1, path, sizeof path, &e), 0);
    struct snapshot_meta in = {.iterations = 1, .features = 8, .outputs = 1};
    cr_assert_eq(snapshot_save(path, m, NULL, &in, &e), 0, "%s", e.msg);
    cr_assert_eq(truncate(path, 12), 0);
    struct snapshot_meta out;
    cr_expect_eq(snapshot_peek(path, &out, &e), ERR_INVALID_DATA);
    cr_expect(strstr(e.msg, "header length"), "%s", e.msg);
    cr_expect_eq(snapshot_load(path, m, NULL, &out, &e), ERR_INVALID_DATA);
    nn_model_free(m);
}
