/*
 * test_devices.c — the job's "device" through the real daemon: cuda:N on a machine without
 * that GPU fails with device_error at once, auto trains on what there is (a GPU when one is
 * free, for networks too), and (only where a GPU exists) baseline and MLP jobs on cuda:0
 * match the same jobs on the CPU.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "jobs.h"

static struct daemon_proc D;

static void setup(void)
{
    cr_assert(daemon_start(&D), "traind did not start (see its log under /tmp/traind-it-*)");
}

/* Every test ends with a clean shutdown, so leaks and sanitizer reports in traind fail it. */
static void teardown(void)
{
    daemon_stop_clean(&D);
}

TestSuite(devices, .init = setup, .fini = teardown, .timeout = 240);

static size_t gpu_count(void)
{
    json_t *d = get_json(&D, "/devices", 200);
    size_t n = json_array_size(json_object_get(d, "gpus"));
    json_decref(d);
    return n;
}

/* The loss column of a finished job's metrics, n rows. */
static void losses(const char *id, double *loss, size_t n)
{
    char path[160];
    snprintf(path, sizeof path, "/jobs/%s/metrics?limit=100000", id);
    json_t *m = get_json(&D, path, 200);
    json_t *rows = json_object_get(m, "rows");
    cr_assert_eq(json_array_size(rows), n, "job %s has %zu rows, not %zu", id, json_array_size(rows), n);
    for (size_t i = 0; i < n; i++)
        loss[i] = json_number_value(json_array_get(json_array_get(rows, i), 2));
    json_decref(m);
}

static const char *train_glob(void)
{
    static char train[512];
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    return train;
}

Test(devices, a_job_on_a_gpu_this_machine_lacks_fails_with_device_error)
{
    size_t gpus = gpu_count();
    cr_assert(gen_dctaxi(&D, "dev", 500, 1));
    char id[64], member[64], want[128];
    snprintf(member, sizeof member, "\"device\":\"cuda:%zu\"", gpus);   /* one past the last */
    submit_job(&D, spec_with(baseline_spec(train_glob(), 5, 64), member), id, sizeof id);
    json_t *j = wait_job_done(&D, id, 30);
    cr_expect_str_eq(json_string_value(json_object_get(j, "state")), "failed");
    json_t *err = json_object_get(j, "error");
    cr_expect_str_eq(json_string_value(json_object_get(err, "code")), "device_error");
    snprintf(want, sizeof want, "cuda:%zu: no such GPU (this machine has %zu)", gpus, gpus);
    cr_expect_str_eq(json_string_value(json_object_get(err, "message")), want);
    cr_expect(json_is_null(json_object_get(j, "device")), "a job that never ran shows no device");
    json_decref(j);
}

Test(devices, the_spec_shows_the_gpu_asked_for)
{
    cr_assert(gen_dctaxi(&D, "dev", 500, 1));
    char id[64], path[128];
    submit_job(&D, spec_with(baseline_spec(train_glob(), 5, 64), "\"device\":\"cuda:7\""), id, sizeof id);
    json_decref(wait_job_done(&D, id, 30));
    snprintf(path, sizeof path, "/jobs/%s", id);
    json_t *j = get_json(&D, path, 200);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(j, "spec"), "device")), "cuda:7");
    json_decref(j);
}

Test(devices, a_bad_gpu_name_is_refused_with_400)
{
    struct http_reply r;
    cr_assert(gen_dctaxi(&D, "dev", 500, 1));
    cr_assert(http(&D, "POST", "/jobs", "application/json",
                   spec_with(baseline_spec(train_glob(), 5, 64), "\"device\":\"cuda:x\""), &r));
    cr_expect_eq(r.status, 400, "%s", r.body);
    http_reply_free(&r);
}

Test(devices, an_auto_job_trains_on_the_cpu_without_a_gpu_and_on_a_gpu_with_one)
{
    size_t gpus = gpu_count();
    cr_assert(gen_dctaxi(&D, "dev", 1000, 1));
    char id[64];
    submit_job(&D, spec_with(baseline_spec(train_glob(), 20, 64), "\"device\":\"auto\""), id, sizeof id);
    json_t *j = wait_job_done(&D, id, 60);
    cr_expect_str_eq(json_string_value(json_object_get(j, "state")), "succeeded", "%s",
                     json_string_value(json_object_get(json_object_get(j, "error"), "message")));
    const char *dev = json_string_value(json_object_get(j, "device"));
    cr_assert_not_null(dev);
    if (gpus == 0)
        cr_expect_str_eq(dev, "cpu");
    else
        cr_expect(strncmp(dev, "cuda:", 5) == 0, "auto ran on %s with %zu GPUs", dev, gpus);
    json_decref(j);
}

/* The baseline spec with its linear model swapped for an MLP (spec_with cannot replace a member). */
static const char *mlp_spec(const char *spec)
{
    static char mlp[2048];
    const char *at = strstr(spec, "{\"type\":\"linear\"}");
    cr_assert_not_null(at);
    snprintf(mlp, sizeof mlp, "%.*s{\"type\":\"mlp\",\"hidden\":[16,8]}%s", (int)(at - spec),
             spec, at + strlen("{\"type\":\"linear\"}"));
    return mlp;
}

/* The CUDA backend trains networks too: auto sends an MLP to a free GPU, else to the CPU. */
Test(devices, an_mlp_on_auto_trains_on_a_gpu_when_there_is_one)
{
    size_t gpus = gpu_count();
    cr_assert(gen_dctaxi(&D, "dev", 1000, 1));
    char id[64];
    submit_job(&D, mlp_spec(spec_with(baseline_spec(train_glob(), 5, 64), "\"device\":\"auto\"")),
               id, sizeof id);
    json_t *j = wait_job_done(&D, id, 60);
    cr_expect_str_eq(json_string_value(json_object_get(j, "state")), "succeeded", "%s",
                     json_string_value(json_object_get(json_object_get(j, "error"), "message")));
    const char *dev = json_string_value(json_object_get(j, "device"));
    cr_assert_not_null(dev);
    if (gpus == 0)
        cr_expect_str_eq(dev, "cpu");
    else
        cr_expect(strncmp(dev, "cuda:", 5) == 0, "auto ran an mlp on %s with %zu GPUs", dev, gpus);
    json_decref(j);
}

/* GPU only: the DC-taxi baseline on cuda:0 has the CPU job's losses to 1e-9 (float64). */
Test(devices, the_baseline_on_cuda_0_has_the_cpu_losses)
{
    if (gpu_count() == 0)
        cr_skip_test("no GPU on this machine (GET /devices lists none): the cuda:0 job is not run");
    enum { N = 30 };
    cr_assert(gen_dctaxi(&D, "dev", 4000, 2));
    char cpu_id[64], gpu_id[64];
    const char *base = baseline_spec(train_glob(), N, 256);
    char cpu_spec[2048];
    snprintf(cpu_spec, sizeof cpu_spec, "%s", spec_with(base, "\"device\":\"cpu\""));
    submit_job(&D, cpu_spec, cpu_id, sizeof cpu_id);
    submit_job(&D, spec_with(base, "\"device\":\"cuda:0\""), gpu_id, sizeof gpu_id);
    json_t *jc = wait_job_done(&D, cpu_id, 120), *jg = wait_job_done(&D, gpu_id, 120);
    cr_assert_str_eq(json_string_value(json_object_get(jg, "state")), "succeeded", "%s",
                     json_string_value(json_object_get(json_object_get(jg, "error"), "message")));
    cr_expect_str_eq(json_string_value(json_object_get(jg, "device")), "cuda:0");
    cr_expect_str_eq(json_string_value(json_object_get(jc, "device")), "cpu");
    double lc[N], lg[N];
    losses(cpu_id, lc, N);
    losses(gpu_id, lg, N);
    for (int i = 0; i < N; i++)
        cr_expect(fabs(lc[i] - lg[i]) <= 1e-9 * fmax(1.0, fabs(lc[i])),
                  "iteration %d: cpu loss %.17g, cuda:0 loss %.17g", i, lc[i], lg[i]);
    json_decref(jc);
    json_decref(jg);
}

/* GPU only: an MLP (relu layers, mse) on cuda:0 has the CPU job's losses (float64). */
Test(devices, an_mlp_on_cuda_0_has_the_cpu_losses)
{
    enum { N = 10 };
    if (gpu_count() == 0)
        cr_skip_test("no GPU on this machine (GET /devices lists none): the cuda:0 job is not run");
    cr_assert(gen_dctaxi(&D, "dev", 1000, 1));
    char cpu_id[64], gpu_id[64], cpu_spec[2048];
    const char *base = baseline_spec(train_glob(), N, 64);
    snprintf(cpu_spec, sizeof cpu_spec, "%s", mlp_spec(spec_with(base, "\"device\":\"cpu\"")));
    submit_job(&D, cpu_spec, cpu_id, sizeof cpu_id);
    submit_job(&D, mlp_spec(spec_with(base, "\"device\":\"cuda:0\"")), gpu_id, sizeof gpu_id);
    json_t *jc = wait_job_done(&D, cpu_id, 120), *jg = wait_job_done(&D, gpu_id, 120);
    cr_assert_str_eq(json_string_value(json_object_get(jg, "state")), "succeeded", "%s",
                     json_string_value(json_object_get(json_object_get(jg, "error"), "message")));
    cr_expect_str_eq(json_string_value(json_object_get(jg, "device")), "cuda:0");
    double lc[N], lg[N];
    losses(cpu_id, lc, N);
    losses(gpu_id, lg, N);
    /* GEMMs sum in cuBLAS's order, not OpenBLAS's: agreement to float64 rounding, not bits */
    for (int i = 0; i < N; i++)
        cr_expect(fabs(lc[i] - lg[i]) <= 1e-9 * fmax(1.0, fabs(lc[i])),
                  "iteration %d: cpu loss %.17g, cuda:0 loss %.17g", i, lc[i], lg[i]);
    json_decref(jc);
    json_decref(jg);
}

/* cuda:0's entry in /devices: its caching allocator's two counters (-1 for null) and "error". */
static void gpu0_memory(long long *allocated, long long *reserved, bool *error_null)
{
    json_t *d = get_json(&D, "/devices", 200);
    json_t *g = json_array_get(json_object_get(d, "gpus"), 0);
    json_t *a = json_object_get(g, "memory_allocated"), *r = json_object_get(g, "memory_reserved");
    *allocated = json_is_integer(a) ? json_integer_value(a) : -1;
    *reserved = json_is_integer(r) ? json_integer_value(r) : -1;
    *error_null = json_is_null(json_object_get(g, "error"));
    json_decref(d);
}

/* PyTorch's memory_allocated / memory_reserved for each GPU: bytes in use while a job trains, none after
   (the cache is emptied when a job ends, as torch.cuda.empty_cache). */
Test(devices, a_gpu_shows_its_allocators_bytes_while_a_job_trains_and_none_after)
{
    if (gpu_count() == 0)
        cr_skip_test("no GPU on this machine (GET /devices lists none)");
    long long allocated, reserved;
    bool well;
    gpu0_memory(&allocated, &reserved, &well);
    cr_expect(well, "a GPU whose backend works has error null");
    cr_expect(allocated == 0 && reserved >= 0, "idle: %lld allocated, %lld reserved", allocated, reserved);

    cr_assert(gen_dctaxi(&D, "dev", 1000, 1));
    char id[64], path[96];
    submit_job(&D, spec_with(baseline_spec(train_glob(), 1000000, 64), "\"device\":\"cuda:0\""), id, sizeof id);
    wait_job_iterations(&D, id, 3);
    gpu0_memory(&allocated, &reserved, &well);
    /* The model's parameters, its gradients and two batch buffers at least. */
    cr_expect(allocated >= 2 * 64 * 9 * 8 && reserved >= allocated, "training: %lld allocated, %lld reserved",
              allocated, reserved);
    snprintf(path, sizeof path, "/jobs/%s/cancel", id);
    struct http_reply r;
    cr_assert(http(&D, "POST", path, NULL, NULL, &r));
    cr_assert_eq(r.status, 202);
    http_reply_free(&r);
    json_decref(wait_job_done(&D, id, 60));
    /* The worker empties the cache right after the job's end is reported: allow it a moment. */
    for (int i = 0; i < 100 && (allocated || reserved); i++) {
        gpu0_memory(&allocated, &reserved, &well);
        if (allocated || reserved)
            usleep(20 * 1000);
    }
    cr_expect(allocated == 0 && reserved == 0, "after the job: %lld allocated, %lld reserved", allocated, reserved);
}
