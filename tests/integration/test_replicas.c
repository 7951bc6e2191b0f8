/*
 * test_replicas.c — "replicas" through the real daemon with three CPU workers: a job trained
 * as 2 and 3 data-parallel replicas (3 splits the batches unevenly) reports the losses of the
 * same job as one, paused and resumed it goes on as if never stopped, shows each replica's
 * figures while it runs, and a job asking for more replicas than there are workers, or for
 * replicas on a GPU, is refused at submit.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "jobs.h"

#define ITERATIONS 24

static struct daemon_proc D;

static void setup(void)
{
    memset(&D, 0, sizeof D);
    snprintf(D.dir, sizeof D.dir, "/tmp/traind-it-XXXXXX");
    cr_assert_not_null(mkdtemp(D.dir));
    static const char *const extra[] = {"--cpu-workers", "3", "--gpus", "none", NULL};
    cr_assert(daemon_spawn(&D, extra), "traind did not start (see its log under %s)", D.dir);
    cr_assert(gen_dctaxi(&D, "rep", 700, 3));
}

/* Every test ends with a clean shutdown, so leaks and sanitizer reports in traind fail it. */
static void teardown(void)
{
    daemon_stop_clean(&D);
}

TestSuite(replicas, .init = setup, .fini = teardown, .timeout = 240);

static const char *train_glob(void)
{
    static char train[512];
    snprintf(train, sizeof train, "%s/rep/part*.csv", D.dir);
    return train;
}

/* The seed baseline, or an MLP with Adam, as n replicas on device; 97-row batches split unevenly. */
static const char *spec_on(bool mlp, int n, const char *device, int iterations)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"data\":{\"train\":\"%s\"},\"model\":%s,\"loss\":\"mse\",\"optimizer\":%s,"
             "\"clip_grad_norm\":0.5,\"batch_size\":97,\"iterations\":%d,\"dtype\":\"float64\",\"seed\":0,"
             "\"replicas\":%d,\"device\":\"%s\"}",
             train_glob(), mlp ? "{\"type\":\"mlp\",\"hidden\":[16,8]}" : "{\"type\":\"linear\"}",
             mlp ? "{\"type\":\"adam\",\"lr\":0.01}" : "{\"type\":\"sgd\",\"lr\":0.03}", iterations, n, device);
    return buf;
}

static const char *spec_of(bool mlp, int n)
{
    return spec_on(mlp, n, "cpu", ITERATIONS);
}

static void losses_of(const char *spec, double *loss)
{
    char id[64];
    submit_job(&D, spec, id, sizeof id);
    json_t *j = wait_job_done(&D, id, 120);
    cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "succeeded", "%s",
                     json_string_value(json_object_get(json_object_get(j, "error"), "message")));
    json_decref(j);
    job_losses(&D, id, loss, ITERATIONS);
}

static void expect_replicas_like_one(bool mlp, double tol)
{
    double one[ITERATIONS], many[ITERATIONS];
    losses_of(spec_of(mlp, 1), one);
    for (int n = 2; n <= 3; n++) {
        losses_of(spec_of(mlp, n), many);
        for (int i = 0; i < ITERATIONS; i++)
            cr_expect_leq(fabs(many[i] - one[i]) / fabs(one[i]), tol,
                          "%d replicas, iteration %d: loss %.17g, one replica %.17g", n, i, many[i], one[i]);
    }
}

Test(replicas, the_baseline_as_2_and_3_replicas_has_one_replicas_losses)
{
    expect_replicas_like_one(false, 1e-9);
}

Test(replicas, an_mlp_with_adam_as_2_and_3_replicas_has_one_replicas_losses)
{
    expect_replicas_like_one(true, 1e-8);
}

Test(replicas, paused_and_resumed_replicas_go_on_as_if_never_stopped)
{
    double one[ITERATIONS], loss[ITERATIONS];
    losses_of(spec_of(false, 1), one);
    char id[64];
    submit_job(&D, spec_with(spec_of(false, 3), "\"checkpoint_every\":1"), id, sizeof id);
    wait_job_iterations(&D, id, 3);
    job_action(&D, id, "pause", 202);
    wait_job_state(&D, id, "paused", 60);
    job_action(&D, id, "resume", 202);
    json_t *j = wait_job_done(&D, id, 120);
    cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "succeeded");
    json_decref(j);
    job_losses(&D, id, loss, ITERATIONS);
    for (int i = 0; i < ITERATIONS; i++)
        cr_expect_leq(fabs(loss[i] - one[i]) / fabs(one[i]), 1e-9, "iteration %d: %.17g, uninterrupted %.17g",
                      i, loss[i], one[i]);
}

static void expect_refused(const char *spec, const char *says)
{
    struct http_reply r;
    cr_assert(http(&D, "POST", "/jobs", "application/json", spec, &r));
    cr_expect_eq(r.status, 400, "%s", r.body);
    json_t *body = json_loads(r.body, 0, NULL);
    json_t *err = json_object_get(body, "error");
    cr_expect_str_eq(json_string_value(json_object_get(err, "field")), "replicas", "%s", r.body);
    const char *msg = json_string_value(json_object_get(err, "message"));
    cr_expect(msg && strstr(msg, says), "the message does not say \"%s\": %s", says, r.body);
    json_decref(body);
    http_reply_free(&r);
}

Test(replicas, more_replicas_than_workers_or_replicas_on_a_gpu_are_refused)
{
    expect_refused(spec_of(false, 4), "4 replicas, but this traind has 3 workers");
    expect_refused(spec_on(false, 2, "cuda:0", ITERATIONS), "replicas on GPUs are not supported yet");
}

Test(replicas, a_running_job_shows_each_replicas_figures_and_an_ended_one_none)
{
    char id[64], path[160];
    submit_job(&D, spec_on(false, 3, "cpu", 10000000), id, sizeof id);
    wait_job_iterations(&D, id, 20);
    snprintf(path, sizeof path, "/jobs/%s/replicas", id);
    json_t *body = get_json(&D, path, 200);
    json_t *list = json_object_get(body, "replicas");
    cr_assert_eq(json_array_size(list), 3, "%zu replicas listed", json_array_size(list));
    for (size_t r = 0; r < 3; r++) {
        json_t *x = json_array_get(list, r);
        cr_expect_eq(json_integer_value(json_object_get(x, "rank")), (json_int_t)r);
        const char *dev = json_string_value(json_object_get(x, "device"));
        cr_expect(dev && strncmp(dev, "cpu:", 4) == 0, "replica %zu on %s", r, dev ? dev : "(null)");
        for (size_t q = 0; q < r; q++)
            cr_expect_str_neq(dev, json_string_value(json_object_get(json_array_get(list, q), "device")),
                              "replicas %zu and %zu share a worker", q, r);
        cr_expect_gt(json_integer_value(json_object_get(x, "iterations")), 0);
        cr_expect_gt(json_number_value(json_object_get(json_object_get(x, "step_seconds"), "median")), 0);
        cr_expect_geq(json_number_value(json_object_get(x, "allreduce_seconds")), 0);
    }
    json_decref(body);
    struct http_reply r;
    cr_assert(http(&D, "GET", "/metrics", NULL, NULL, &r));
    char series[160];
    snprintf(series, sizeof series, "traind_replica_step_seconds{job=\"%s\",replica=\"2\"", id);
    cr_expect(strstr(r.body, series) != NULL, "/metrics lacks %s", series);
    http_reply_free(&r);
    job_action(&D, id, "cancel", 202);
    wait_job_state(&D, id, "cancelled", 60);
    snprintf(path, sizeof path, "/jobs/%s/replicas", id);
    body = get_json(&D, path, 200);
    cr_expect_eq(json_array_size(json_object_get(body, "replicas")), 0, "an ended job lists replicas");
    cr_expect_eq(json_integer_value(json_object_get(body, "replicas_asked")), 3);
    json_decref(body);
}
