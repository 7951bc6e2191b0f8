/*
 * test_gpu_feed.c — a GPU job's batch feed through the real daemon (GPU only; skips without
 * one): the next batch is copied to the device while the current step runs,
 * and neither epochs, a dropped tail, evaluation between steps nor a pause and resume may
 * change which batch a step sees. The reference is the same job on the CPU.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

TestSuite(gpu_feed, .init = setup, .fini = teardown, .timeout = 240);

static void gpu_or_skip(void)
{
    json_t *d = get_json(&D, "/devices", 200);
    size_t n = json_array_size(json_object_get(d, "gpus"));
    json_decref(d);
    if (n == 0)
        cr_skip_test("no GPU on this machine (GET /devices lists none): the cuda:0 jobs are not run");
}

/* A finished job's metrics, asserting it ended in state on dev and has rows for iterations 0, 1, ... */
static json_t *rows_of(const char *id, const char *state, const char *dev)
{
    json_t *job = wait_job_done(&D, id, 200);
    cr_assert_str_eq(json_string_value(json_object_get(job, "state")), state, "job %s: %s", id,
                     json_string_value(json_object_get(json_object_get(job, "error"), "message")));
    cr_expect_str_eq(json_string_value(json_object_get(job, "device")), dev);
    json_decref(job);
    char path[160];
    snprintf(path, sizeof path, "/jobs/%s/metrics?limit=100000", id);
    json_t *m = get_json(&D, path, 200);
    json_t *rows = json_object_get(m, "rows");
    for (size_t i = 0; i < json_array_size(rows); i++)
        cr_assert_eq(json_integer_value(json_array_get(json_array_get(rows, i), 0)), (json_int_t)i,
                     "job %s: row %zu is not iteration %zu", id, i, i);
    return m;
}

/* Equal to float64 rounding (cuBLAS and OpenBLAS sum in different orders); NaN only with NaN. */
static bool close(double a, double b)
{
    return (isnan(a) && isnan(b)) || fabs(a - b) <= 1e-9 * fmax(1.0, fabs(a));
}

/*
 * The loss and eval_loss columns of a succeeded cpu job and a cuda:0 job that ended in
 * gpu_state, row by row over the cpu job's rows; the number of rows compared.
 */
static size_t expect_same_losses(const char *cpu_id, const char *gpu_id, const char *gpu_state)
{
    json_t *mc = rows_of(cpu_id, "succeeded", "cpu"), *mg = rows_of(gpu_id, gpu_state, "cuda:0");
    json_t *rc = json_object_get(mc, "rows"), *rg = json_object_get(mg, "rows");
    size_t n = json_array_size(rc);
    if (strcmp(gpu_state, "succeeded") == 0)
        cr_expect_eq(json_array_size(rg), n, "cuda:0 did %zu iterations, the cpu %zu", json_array_size(rg), n);
    else
        cr_expect_geq(json_array_size(rg), n, "cuda:0 did %zu iterations, the cpu %zu", json_array_size(rg), n);
    size_t loss = metrics_column(mc, "loss"), eval = metrics_column(mc, "eval_loss");
    for (size_t i = 0; i < n && i < json_array_size(rg); i++)
        for (size_t c = 0; c < 2; c++) {
            size_t col = c ? eval : loss;
            json_t *a = json_array_get(json_array_get(rc, i), col), *b = json_array_get(json_array_get(rg, i), col);
            cr_expect_eq(json_is_null(a), json_is_null(b), "iteration %zu: %s on one device only", i,
                         c ? "eval_loss" : "loss");
            if (json_is_null(a) || json_is_null(b))
                continue;
            double x = json_number_value(a), y = json_number_value(b);
            cr_expect(close(x, y), "iteration %zu: cpu %s %.17g, cuda:0 %.17g", i, c ? "eval_loss" : "loss", x, y);
        }
    json_decref(mc);
    json_decref(mg);
    return n;
}

/* The same job on the cpu and on cuda:0; their ids. */
static void submit_pair(const char *spec, char *cpu_id, char *gpu_id)
{
    char cpu_spec[2048];
    snprintf(cpu_spec, sizeof cpu_spec, "%s", spec_with(spec, "\"device\":\"cpu\""));
    submit_job(&D, cpu_spec, cpu_id, 64);
    submit_job(&D, spec_with(spec, "\"device\":\"cuda:0\""), gpu_id, 64);
}

/*
 * 3 epochs of 1000 rows in shuffled partitions, batches of 96 with the 40-row tail dropped (no
 * shard counts, so the epoch's end shows only when a batch of the next epoch arrives: the
 * batch fetched ahead of the last step is past the end), an evaluation every 4th iteration.
 */
Test(gpu_feed, an_epochs_job_with_a_dropped_tail_and_evaluations_has_the_cpu_jobs_losses)
{
    gpu_or_skip();
    cr_assert(gen_dctaxi(&D, "dev", 1000, 3));
    cr_assert(gen_dctaxi_seed(&D, "test", 300, 1, 1));
    char spec[1024], cpu_id[64], gpu_id[64];
    snprintf(spec, sizeof spec,
             "{\"data\":{\"train\":\"%s/dev/part*.csv\",\"test\":\"%s/test/part*.csv\","
             "\"shuffle\":{\"partitions\":true,\"buffer\":200},\"drop_last\":true},"
             "\"model\":{\"type\":\"linear\"},\"loss\":\"mse\","
             "\"optimizer\":{\"type\":\"sgd\",\"lr\":0.03},\"clip_grad_norm\":0.5,"
             "\"batch_size\":96,\"epochs\":3,\"eval_every\":4,\"dtype\":\"float64\",\"seed\":5}",
             D.dir, D.dir);
    submit_pair(spec, cpu_id, gpu_id);
    cr_expect_eq(expect_same_losses(cpu_id, gpu_id, "succeeded"), 30, "3 epochs of 10 full batches");
    cr_expect(!daemon_log_contains(&D, "of the training set stay on"),
              "shuffled batches differ every epoch: none may be reused");
}

/*
 * Unshuffled, batch i is the same rows every epoch: after the first epoch the GPU job trains on
 * the copies kept on the device (the log says so) and still has the CPU job's losses.
 */
Test(gpu_feed, an_unshuffled_training_set_stays_on_the_gpu_after_its_first_epoch)
{
    gpu_or_skip();
    cr_assert(gen_dctaxi(&D, "dev", 1000, 3));
    char spec[1024], cpu_id[64], gpu_id[64], line[200];
    snprintf(spec, sizeof spec,
             "{\"data\":{\"train\":\"%s/dev/part*.csv\",\"test\":\"%s/dev/part*.csv\"},"
             "\"model\":{\"type\":\"linear\"},\"loss\":\"mse\","
             "\"optimizer\":{\"type\":\"sgd\",\"lr\":0.03},\"clip_grad_norm\":0.5,"
             "\"batch_size\":128,\"epochs\":4,\"eval_every\":5,\"dtype\":\"float64\",\"seed\":3}",
             D.dir, D.dir);
    submit_pair(spec, cpu_id, gpu_id);
    cr_expect_eq(expect_same_losses(cpu_id, gpu_id, "succeeded"), 32, "4 epochs of 8 batches");
    snprintf(line, sizeof line, "job %s: 8 batches (0.1 MB) of the training set stay on cuda:0; epochs after 0 "
             "copy those to the device no more", gpu_id);
    cr_expect(daemon_log_contains(&D, line), "no line \"%s\" in the log", line);
}

/* The last batch of each epoch is a short one (1000 = 7 * 128 + 104), an MLP with momentum. */
Test(gpu_feed, an_epochs_job_with_short_last_batches_has_the_cpu_jobs_losses)
{
    gpu_or_skip();
    cr_assert(gen_dctaxi(&D, "dev", 1000, 2));
    char spec[1024], cpu_id[64], gpu_id[64];
    snprintf(spec, sizeof spec,
             "{\"data\":{\"train\":\"%s/dev/part*.csv\",\"test\":\"%s/dev/part*.csv\"},"
             "\"model\":{\"type\":\"mlp\",\"hidden\":[8]},\"loss\":\"mse\","
             "\"optimizer\":{\"type\":\"sgd\",\"lr\":0.01,\"momentum\":0.9},\"clip_grad_norm\":0.5,"
             "\"batch_size\":128,\"epochs\":2,\"eval_every\":3,\"dtype\":\"float64\",\"seed\":2}",
             D.dir, D.dir);
    submit_pair(spec, cpu_id, gpu_id);
    cr_expect_eq(expect_same_losses(cpu_id, gpu_id, "succeeded"), 16, "2 epochs of 8 batches");
}

static void post(const char *id, const char *verb)
{
    char path[128];
    snprintf(path, sizeof path, "/jobs/%s/%s", id, verb);
    struct http_reply r;
    cr_assert(http(&D, "POST", path, NULL, NULL, &r));
    cr_assert_eq(r.status, 202, "POST %s: %ld %s", path, r.status, r.body);
    http_reply_free(&r);
}

static void pause_spec(char *spec, size_t cap, int iterations, int every, const char *dev)
{
    snprintf(spec, cap,
             "{\"data\":{\"train\":\"%s/dev/part*.csv\",\"test\":\"%s/test/part*.csv\"},"
             "\"model\":{\"type\":\"linear\"},\"loss\":\"mse\","
             "\"optimizer\":{\"type\":\"sgd\",\"lr\":0.03},\"clip_grad_norm\":0.5,"
             "\"batch_size\":48,\"iterations\":%d,\"eval_every\":%d,\"dtype\":\"float64\","
             "\"seed\":0,\"device\":\"%s\"}", D.dir, D.dir, iterations, every, dev);
}

/*
 * Paused with the next batch already on the device: the checkpoint's cursor is after the last
 * batch stepped, so the resumed job repeats and skips nothing. A long cuda:0 job is paused,
 * resumed, and cancelled after iteration M (some 50 past the pause, wherever the device's speed
 * put it); its first M rows are those of an M-iteration CPU job (whose last iteration is
 * evaluated, as every 20th of the GPU job's is).
 */
Test(gpu_feed, a_paused_and_resumed_gpu_job_has_an_uninterrupted_cpu_jobs_losses)
{
    gpu_or_skip();
    enum { EVERY = 20 };
    cr_assert(gen_dctaxi(&D, "dev", 2000, 2));
    cr_assert(gen_dctaxi_seed(&D, "test", 200, 1, 1));
    char spec[1024], cpu_id[64], gpu_id[64], path[128];
    pause_spec(spec, sizeof spec, 1000000, EVERY, "cuda:0");
    submit_job(&D, spec, gpu_id, sizeof gpu_id);
    wait_job_iterations(&D, gpu_id, 7);
    post(gpu_id, "pause");
    wait_job_state(&D, gpu_id, "paused", 60);
    snprintf(path, sizeof path, "/jobs/%s", gpu_id);
    json_t *job = get_json(&D, path, 200);
    json_int_t at = json_integer_value(json_object_get(json_object_get(job, "progress"), "iteration"));
    json_decref(job);
    cr_assert(at > 0, "paused at iteration %lld: nothing was tested", (long long)at);
    const int M = (int)((at + 50) / EVERY + 1) * EVERY;
    post(gpu_id, "resume");
    wait_job_iterations(&D, gpu_id, M);
    post(gpu_id, "cancel");
    pause_spec(spec, sizeof spec, M, EVERY, "cpu");
    submit_job(&D, spec, cpu_id, sizeof cpu_id);
    cr_expect_eq(expect_same_losses(cpu_id, gpu_id, "cancelled"), (size_t)M);
}

/*
 * A bad label in a later batch. The GPU checks labels on the device and reads the result with
 * the step's loss, at its one wait, so the step never waits for its labels; the job still fails
 * at that step, with the CPU job's message, and both keep the rows of the steps before it.
 */
Test(gpu_feed, a_bad_label_in_a_later_batch_fails_the_gpu_job_as_it_fails_the_cpu_job)
{
    gpu_or_skip();
    static const struct {
        const char *name, *loss, *dtype, *want;
        int outputs, bad;
    } cases[] = {
        {"ce", "cross_entropy", "float32",
         "iteration 2 (batch 2 of epoch 0): label 7 at row 3 is not a class index in [0, 3)", 3, 7},
        {"bce", "bce", "float64",
         "iteration 2 (batch 2 of epoch 0): label 2 at row 3 is not in [0, 1]", 1, 2},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char text[1024] = "", dir[512], spec[1024], cpu_id[64], gpu_id[64];
        for (int i = 0; i < 32; i++)   /* batches of 8: row 3 of batch 2 is bad */
            snprintf(text + strlen(text), sizeof text - strlen(text), "%d,%d.25,%d\n",
                     i == 19 ? cases[c].bad : i % (cases[c].outputs == 1 ? 2 : 3), i % 5, 7 - i % 4);
        write_partition(&D, cases[c].name, text, dir, sizeof dir);
        snprintf(spec, sizeof spec,
                 "{\"data\":{\"train\":\"%s/part*.csv\"},"
                 "\"model\":{\"type\":\"mlp\",\"hidden\":[6],\"outputs\":%d},\"loss\":\"%s\","
                 "\"batch_size\":8,\"iterations\":4,\"dtype\":\"%s\",\"seed\":2}",
                 dir, cases[c].outputs, cases[c].loss, cases[c].dtype);
        submit_pair(spec, cpu_id, gpu_id);
        char *mc = job_failure(&D, cpu_id, "invalid_data", 120), *mg = job_failure(&D, gpu_id, "invalid_data", 120);
        cr_expect_str_eq(mc, cases[c].want);
        cr_expect_str_eq(mg, mc);
        free(mc);
        free(mg);
        for (int k = 0; k < 2; k++) {
            char path[160];
            snprintf(path, sizeof path, "/jobs/%s/metrics", k ? gpu_id : cpu_id);
            json_t *m = get_json(&D, path, 200);
            cr_expect_eq(json_array_size(json_object_get(m, "rows")), 2, "%s on %s: iterations 0 and 1",
                         cases[c].loss, k ? "cuda:0" : "cpu");
            json_decref(m);
        }
    }
}
