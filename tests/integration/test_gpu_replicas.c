/*
 * test_gpu_replicas.c — "replicas" on GPUs through the real daemon (skips with fewer than two
 * GPUs): the linear float64 baseline and an MLP with Adam, trained as 2 and 3 replicas on
 * GPUs (their gradients summed by NCCL; 3 splits the 97-row batches unevenly), report the
 * losses of the same job as one replica on cuda:0 (the MLP's in gradient buckets, too, those
 * of its gradient summed whole, bit for bit) (the linear one its eval_loss on data.test
 * too, each replica evaluating its share), and so do replicas paused and resumed
 * (their NCCL communicators given back and made again). A job asking for more replicas than
 * GPUs, or for replicas on one named GPU, is refused at submit. Run in the gpu-emu suite over the
 * emulated runtime and NCCL with TRAIND_EMU_DEVICES=4, and in the integration suite on
 * whatever GPUs the machine has.
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
    cr_assert(daemon_start(&D), "traind did not start (see its log under /tmp/traind-it-*)");
    cr_assert(gen_dctaxi(&D, "rep", 700, 3));
}

static void teardown(void)
{
    daemon_stop_clean(&D);
}

TestSuite(gpu_replicas, .init = setup, .fini = teardown, .timeout = 280);

/* The GPUs traind uses; the test is skipped with fewer than 2. */
static int gpus_or_skip(void)
{
    json_t *d = get_json(&D, "/devices", 200);
    int n = (int)json_array_size(json_object_get(d, "gpus"));
    json_decref(d);
    if (n < 2)
        cr_skip_test("%d GPU(s) here (GET /devices): replicas on GPUs need 2 at least", n);
    return n;
}

static const char *spec_for(bool mlp, int n, const char *device, int iterations)
{
    static char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"data\":{\"train\":\"%s/rep/part*.csv\"},\"model\":%s,\"loss\":\"mse\",\"optimizer\":%s,"
             "\"clip_grad_norm\":0.5,\"batch_size\":97,\"iterations\":%d,\"dtype\":\"float64\",\"seed\":0,"
             "\"replicas\":%d,\"device\":\"%s\"}",
             D.dir, mlp ? "{\"type\":\"mlp\",\"hidden\":[16,8]}" : "{\"type\":\"linear\"}",
             mlp ? "{\"type\":\"adam\",\"lr\":0.01}" : "{\"type\":\"sgd\",\"lr\":0.03}", iterations, n,
             device);
    return buf;
}

static const char *spec_on(bool mlp, int n, const char *device)
{
    return spec_for(mlp, n, device, ITERATIONS);
}

/* Trains spec to success on a GPU; its losses into loss, and its eval_loss column into eval (when not NULL). */
static void losses_of(const char *spec, double *loss, double *eval)
{
    char id[64];
    submit_job(&D, spec, id, sizeof id);
    json_t *j = wait_job_done(&D, id, 240);
    cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "succeeded", "%s",
                     json_string_value(json_object_get(json_object_get(j, "error"), "message")));
    const char *dev = json_string_value(json_object_get(j, "device"));
    cr_expect(dev && strncmp(dev, "cuda:", 5) == 0, "job %s ran on %s, not a GPU", id, dev ? dev : "(null)");
    json_decref(j);
    job_losses(&D, id, loss, ITERATIONS);
    if (eval)
        job_column(&D, id, "eval_loss", eval, ITERATIONS);
}

/*
 * The linear job also evaluates data.test (301 rows: 97-row batches and a 10-row tail, split
 * unevenly over 3) after iterations 11 and 23, each GPU replica its share of every test batch,
 * copied to its GPU: its eval_loss is one replica's too.
 */
static const char *with_test(const char *spec)
{
    char test[400], both[2400];
    snprintf(test, sizeof test, "\"test\":\"%s/reptest/part*.csv\"", D.dir);
    snprintf(both, sizeof both, "%s", spec_with_data(spec, test));
    return spec_with(both, "\"eval_every\":12");
}

static void expect_replicas_like_one(bool mlp, double tol)
{
    int gpus = gpus_or_skip();
    double one[ITERATIONS], many[ITERATIONS], eval_one[ITERATIONS], eval_many[ITERATIONS];
    if (!mlp)
        cr_assert(gen_dctaxi_seed(&D, "reptest", 301, 2, 1));
    losses_of(mlp ? spec_on(mlp, 1, "cuda:0") : with_test(spec_on(mlp, 1, "cuda:0")), one, mlp ? NULL : eval_one);
    for (int n = 2; n <= 3 && n <= gpus; n++) {
        losses_of(mlp ? spec_on(mlp, n, "auto") : with_test(spec_on(mlp, n, "auto")), many, mlp ? NULL : eval_many);
        for (int i = 0; i < ITERATIONS; i++)
            cr_expect_leq(fabs(many[i] - one[i]) / fabs(one[i]), tol,
                          "%d replicas, iteration %d: loss %.17g, one replica %.17g", n, i, many[i], one[i]);
        for (int i = 0; i < ITERATIONS && !mlp; i++)
            cr_expect((i == 11 || i == 23) ? fabs(eval_many[i] - eval_one[i]) <= tol * fabs(eval_one[i])
                                           : isnan(eval_many[i]) && isnan(eval_one[i]),
                      "%d replicas, after iteration %d: eval_loss %.17g, one replica %.17g", n, i, eval_many[i],
                      eval_one[i]);
    }
}

Test(gpu_replicas, the_baseline_as_2_and_3_gpu_replicas_has_one_replicas_losses)
{
    expect_replicas_like_one(false, 1e-9);
}

Test(gpu_replicas, an_mlp_with_adam_as_2_and_3_gpu_replicas_has_one_replicas_losses)
{
    expect_replicas_like_one(true, 1e-8);
}

/*
 * The MLP's gradient (289 float64s) in buckets of 0.0005 MiB (65 elements: 5 buckets, each
 * all-reduced by NCCL on a side stream while backward goes on) gives the losses of it
 * all-reduced whole, bit for bit (2 replicas: each element's sum is a + b in either order), and
 * one replica's; GET /jobs/{id}/replicas counts the buckets.
 */
Test(gpu_replicas, an_mlp_whose_gradient_goes_in_buckets_on_2_gpus_has_the_losses_of_it_whole)
{
    gpus_or_skip();
    double one[ITERATIONS], whole[ITERATIONS], bucketed[ITERATIONS];
    losses_of(spec_on(true, 1, "cuda:0"), one, NULL);
    losses_of(spec_with(spec_on(true, 2, "auto"), "\"replica_bucket_mb\":0"), whole, NULL);
    losses_of(spec_with(spec_on(true, 2, "auto"), "\"replica_bucket_mb\":0.0005"), bucketed, NULL);
    expect_bucketed_as_whole(bucketed, whole, ITERATIONS);
    for (int i = 0; i < ITERATIONS; i++) {
        cr_expect_leq(fabs(bucketed[i] - one[i]) / fabs(one[i]), 1e-8,
                      "iteration %d: loss %.17g in buckets, one replica %.17g", i, bucketed[i], one[i]);
    }
    char id[64], path[160];
    submit_job(&D, spec_with(spec_for(true, 2, "auto", 1000000), "\"replica_bucket_mb\":0.0005"), id, sizeof id);
    wait_job_iterations(&D, id, 3);
    snprintf(path, sizeof path, "/jobs/%s/replicas", id);
    json_t *body = get_json(&D, path, 200);
    json_t *list = json_object_get(body, "replicas");
    cr_assert_eq(json_array_size(list), 2, "%zu replicas listed", json_array_size(list));
    for (size_t r = 0; r < 2; r++) {
        json_int_t buckets = json_integer_value(json_object_get(json_array_get(list, r), "buckets"));
        cr_expect_eq(buckets, 5, "replica %zu: %lld buckets", r, (long long)buckets);
    }
    json_decref(body);
    job_action(&D, id, "cancel", 202);
    wait_job_state(&D, id, "cancelled", 60);
}

/* Their worlds end and new ones begin: each rank's NCCL communicator is given back and made again. */
Test(gpu_replicas, paused_and_resumed_gpu_replicas_go_on_as_if_never_stopped)
{
    int gpus = gpus_or_skip();
    int n = gpus < 3 ? gpus : 3;
    double one[ITERATIONS], loss[ITERATIONS];
    losses_of(spec_on(false, 1, "cuda:0"), one, NULL);
    char id[64];
    submit_job(&D, spec_with(spec_on(false, n, "auto"), "\"checkpoint_every\":1"), id, sizeof id);
    wait_job_iterations(&D, id, 3);
    job_action(&D, id, "pause", 202);
    wait_job_state(&D, id, "paused", 120);
    job_action(&D, id, "resume", 202);
    json_t *j = wait_job_done(&D, id, 240);
    cr_assert_str_eq(json_string_value(json_object_get(j, "state")), "succeeded", "%s",
                     json_string_value(json_object_get(json_object_get(j, "error"), "message")));
    json_decref(j);
    job_losses(&D, id, loss, ITERATIONS);
    for (int i = 0; i < ITERATIONS; i++)
        cr_expect_leq(fabs(loss[i] - one[i]) / fabs(one[i]), 1e-9, "%d replicas, iteration %d: %.17g, "
                      "uninterrupted one replica %.17g", n, i, loss[i], one[i]);
}

static void expect_refused(const char *spec, const char *says)
{
    struct http_reply r;
    cr_assert(http(&D, "POST", "/jobs", "application/json", spec, &r));
    cr_expect_eq(r.status, 400, "%s", r.body);
    cr_expect(strstr(r.body, says), "the reply does not say \"%s\": %s", says, r.body);
    http_reply_free(&r);
}

Test(gpu_replicas, more_replicas_than_gpus_or_on_one_named_gpu_are_refused)
{
    int gpus = gpus_or_skip();
    char says[128];
    snprintf(says, sizeof says, "%d replicas, but this traind has %d GPUs", gpus + 1, gpus);
    expect_refused(spec_on(false, gpus + 1, "auto"), says);
    expect_refused(spec_on(false, 2, "cuda:0"), "\\\"cuda:0\\\" names one");
}
