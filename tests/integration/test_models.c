/* test_models.c — networks through the real traind: an MLP classifier trains as PyTorch's does. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"
#include "jobs.h"
#include "helpers.h" /* fixture_read, from tests/unit/core */

static struct daemon_proc D;

static void setup(void)
{
    cr_assert(daemon_start(&D), "traind did not start");
}

static void teardown(void)
{
    daemon_stop_clean(&D);
}

TestSuite(integration_models, .init = setup, .fini = teardown, .timeout = 240);

/* The parity fixture's 256 rows as a CSV: label first, then the 8 float32 features. */
static void write_fixture_csv(const char *path)
{
    int64_t nx, ny;
    double *x = fixture_read("core_parity_mlp.txt", "X", &nx);
    double *y = fixture_read("core_parity_mlp.txt", "y", &ny);
    cr_assert_eq(nx, ny * 8);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    for (int64_t i = 0; i < ny; i++) {
        fprintf(f, "%d", (int)y[i]);
        for (int j = 0; j < 8; j++)
            fprintf(f, ",%.9g", x[i * 8 + j]); /* 9 digits: the same float32 back */
        fputc('\n', f);
    }
    cr_assert_eq(fclose(f), 0);
    free(x);
    free(y);
}

Test(integration_models, mlp_classifier_trains_to_pytorchs_losses)
{
    char dir[512], csv[600], spec[1024], path[128];
    snprintf(dir, sizeof dir, "%s/mlp", D.dir);
    cr_assert_eq(mkdir(dir, 0700), 0);
    snprintf(csv, sizeof csv, "%s/part-00000.csv", dir);
    write_fixture_csv(csv);
    /* nn.Sequential(Linear(8,64), ReLU, Linear(64,64), ReLU, Linear(64,3)); the 3 classes
     * come from the labels. One batch of all 256 rows per iteration, as the fixture trains. */
    snprintf(spec, sizeof spec,
             "{\"name\":\"mlp\",\"data\":{\"train\":\"%s/part*.csv\"},"
             "\"model\":{\"type\":\"mlp\",\"hidden\":[64,64],\"activation\":\"relu\"},"
             "\"loss\":\"cross_entropy\",\"optimizer\":{\"type\":\"adam\",\"lr\":0.001},"
             "\"batch_size\":256,\"iterations\":20,\"dtype\":\"float32\",\"seed\":0}", dir);
    char id[64];
    submit_job(&D, spec, id, sizeof id);
    json_t *job = wait_job_done(&D, id, 120);
    cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded", "%s",
                     json_string_value(json_object_get(json_object_get(job, "error"), "message")));
    json_decref(job);

    snprintf(path, sizeof path, "/jobs/%s/metrics", id);
    json_t *m = get_json(&D, path, 200);
    json_t *rows = json_object_get(m, "rows");
    int64_t n;
    double *want = fixture_read("core_parity_mlp.txt", "loss", &n);
    cr_assert_eq((int64_t)json_array_size(rows), n);
    for (int64_t i = 0; i < n; i++) {
        double got = json_number_value(json_array_get(json_array_get(rows, (size_t)i), 2));
        cr_expect_leq(fabs(got - want[i]), 1e-5 * fabs(want[i]), "iteration %lld: %.9g, PyTorch %.9g",
                      (long long)i, got, want[i]);
    }
    free(want);
    json_decref(m);
}

Test(integration_models, a_label_that_is_not_a_class_fails_the_job_with_its_row)
{
    char dir[512], spec[1024], id[64];
    write_partition(&D, "bad", "0,1.5,2\n1,0.5,1\n2.5,3,4\n", dir, sizeof dir);
    snprintf(spec, sizeof spec,
             "{\"data\":{\"train\":\"%s/part*.csv\"},\"model\":{\"type\":\"mlp\",\"hidden\":[4]},"
             "\"loss\":\"cross_entropy\",\"batch_size\":8,\"iterations\":2,\"dtype\":\"float32\"}", dir);
    submit_job(&D, spec, id, sizeof id);
    char *msg = job_failure(&D, id, "invalid_data", 60);
    cr_expect_not_null(strstr(msg, "row 3"), "%s", msg);
    free(msg);
}

/*
 * With model.outputs set, the first batch is not scanned; a bad label in a later batch fails
 * its step. The job says which iteration and batch, and the steps before it keep their rows.
 */
Test(integration_models, a_bad_label_in_a_later_batch_fails_the_job_naming_its_iteration)
{
    char text[512] = "", dir[512], spec[1024], path[128], id[64];
    for (int i = 0; i < 12; i++)   /* batches of 4: the bad label is row 1 of batch 2 */
        snprintf(text + strlen(text), sizeof text - strlen(text), "%d,%d.5,%d\n",
                 i == 9 ? 5 : i % 3, i, 12 - i);
    write_partition(&D, "late", text, dir, sizeof dir);
    snprintf(spec, sizeof spec,
             "{\"data\":{\"train\":\"%s/part*.csv\"},"
             "\"model\":{\"type\":\"mlp\",\"hidden\":[4],\"outputs\":3},"
             "\"loss\":\"cross_entropy\",\"batch_size\":4,\"iterations\":3,\"dtype\":\"float32\"}", dir);
    submit_job(&D, spec, id, sizeof id);
    char *msg = job_failure(&D, id, "invalid_data", 60);
    cr_expect_str_eq(msg, "iteration 2 (batch 2 of epoch 0): label 5 at row 1 is not a class index in [0, 3)");
    free(msg);
    snprintf(path, sizeof path, "/jobs/%s/metrics", id);
    json_t *m = get_json(&D, path, 200);
    cr_expect_eq(json_array_size(json_object_get(m, "rows")), 2, "iterations 0 and 1 keep their rows");
    json_decref(m);
}

/* Trains spec to success, then POSTs rows to its predict path (into path) and asserts a 200 in r. */
static void predict_after_training(const char *spec, const char *rows, char *path, size_t cap,
                                   struct http_reply *r)
{
    char id[64];
    submit_job(&D, spec, id, sizeof id);
    json_t *job = wait_job_done(&D, id, 60);
    cr_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded");
    json_decref(job);
    snprintf(path, cap, "/jobs/%s/predict", id);
    cr_assert(http(&D, "POST", path, "application/json", rows, r));
    cr_assert_eq(r->status, 200, "%s", r->body);
}

Test(integration_models, predict_with_a_classifier_gives_one_logit_per_class_and_row)
{
    char dir[512], csv[600], spec[1024], path[128];
    snprintf(dir, sizeof dir, "%s/mlp", D.dir);
    cr_assert_eq(mkdir(dir, 0700), 0);
    snprintf(csv, sizeof csv, "%s/part-00000.csv", dir);
    write_fixture_csv(csv);
    snprintf(spec, sizeof spec,
             "{\"data\":{\"train\":\"%s/part*.csv\"},"
             "\"model\":{\"type\":\"mlp\",\"hidden\":[16],\"activation\":\"relu\"},"
             "\"loss\":\"cross_entropy\",\"optimizer\":{\"type\":\"adam\",\"lr\":0.01},"
             "\"batch_size\":64,\"iterations\":5,\"dtype\":\"float32\",\"seed\":0}", dir);
    struct http_reply r;
    predict_after_training(spec, "{\"rows\":[[1,2,3,4,5,6,7,8],[0,0,0,0,0,0,0,0]]}", path, sizeof path, &r);
    json_t *p = json_object_get(r.json, "predictions");
    cr_assert_eq(json_array_size(p), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *row = json_array_get(p, i);
        cr_assert_eq(json_array_size(row), 3, "three classes, three logits: %s", r.body);
        for (size_t k = 0; k < 3; k++)
            cr_expect(json_is_number(json_array_get(row, k)));
    }
    http_reply_free(&r);
    cr_assert(http(&D, "POST", path, "application/json", "{\"rows\":[[1,2,3]]}", &r));
    cr_expect_eq(r.status, 400, "%s", r.body);
    http_reply_free(&r);
}

/* A layers stack's outputs come from its last linear layer; its checkpoint says so and predict works. */
Test(integration_models, predict_with_a_layers_model_gives_one_number_per_row)
{
    char dir[512], spec[1024], path[160];
    write_partition(&D, "reg", "1,0.5,2\n2,1.5,1\n3,2.5,0\n4,3.5,-1\n", dir, sizeof dir);
    snprintf(spec, sizeof spec,
             "{\"data\":{\"train\":\"%s/part*.csv\"},"
             "\"model\":{\"layers\":[{\"linear\":8},{\"relu\":{}},{\"linear\":1}]},"
             "\"batch_size\":4,\"iterations\":3,\"dtype\":\"float32\",\"seed\":0}", dir);
    struct http_reply r;
    predict_after_training(spec, "{\"rows\":[[1,2],[0,0]]}", path, sizeof path, &r);
    json_t *p = json_object_get(r.json, "predictions");
    cr_expect_eq(json_array_size(p), 2, "%s", r.body);
    cr_expect(json_is_number(json_array_get(p, 0)) && json_is_number(json_array_get(p, 1)), "%s", r.body);
    http_reply_free(&r);
}

/* A checkpoint removed by hand: 410, and the message names it inside the state dir, not by the server's path. */
Test(integration_models, a_missing_model_is_gone_and_named_relative_to_the_state_dir)
{
    char dir[512], spec[1024], path[160], id[64], ckdir[700];
    write_partition(&D, "reg", "1,0.5,2\n2,1.5,1\n", dir, sizeof dir);
    snprintf(spec, sizeof spec,
             "{\"data\":{\"train\":\"%s/part*.csv\"},\"model\":{\"type\":\"mlp\",\"hidden\":[2]},"
             "\"batch_size\":2,\"iterations\":1}", dir);
    submit_job(&D, spec, id, sizeof id);
    json_decref(wait_job_done(&D, id, 60));
    char state[300];
    daemon_state_dir(&D, state, sizeof state);
    snprintf(ckdir, sizeof ckdir, "%s/checkpoints/%s", state, id);
    char cmd[800];
    snprintf(cmd, sizeof cmd, "for f in '%s'/*.safetensors; do : > \"$f\"; done", ckdir);
    cr_assert_eq(system(cmd), 0);
    struct http_reply r;
    snprintf(path, sizeof path, "/jobs/%s/predict", id);
    cr_assert(http(&D, "POST", path, "application/json", "{\"rows\":[[1,2]]}", &r));
    cr_expect_eq(r.status, 410, "%s", r.body);
    const char *msg = json_string_value(json_object_get(json_object_get(r.json, "error"), "message"));
    cr_assert_not_null(msg, "%s", r.body);
    cr_expect_null(strstr(msg, D.dir), "the server's path is not shown: %s", msg);
    char rel[128];
    snprintf(rel, sizeof rel, "checkpoints/%s/", id);
    cr_expect_not_null(strstr(msg, rel), "the file is named inside the state dir: %s", msg);
    http_reply_free(&r);
}
