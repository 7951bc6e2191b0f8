/*
 * test_device_list.c — "device" as a list and --gpus, through the real daemon with two CPU
 * workers and --gpus none: a list runs on the first free device it names, waits for one,
 * fails with device_error when it names only GPUs traind lacks; bad lists are refused.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "jobs.h"

static struct daemon_proc D;

static void setup(void)
{
    memset(&D, 0, sizeof D);
    snprintf(D.dir, sizeof D.dir, "/tmp/traind-it-XXXXXX");
    cr_assert_not_null(mkdtemp(D.dir));
    static const char *const extra[] = {"--cpu-workers", "2", "--gpus", "none", NULL};
    cr_assert(daemon_spawn(&D, extra), "traind did not start (see its log under %s)", D.dir);
}

/* Every test ends with a clean shutdown, so leaks and sanitizer reports in traind fail it. */
static void teardown(void)
{
    daemon_stop_clean(&D);
}

TestSuite(device_list, .init = setup, .fini = teardown, .timeout = 240);

static const char *train_glob(void)
{
    static char train[512];
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    return train;
}

static const char *job_text(const char *id, const char *key)
{
    static char value[128];
    char path[128];
    snprintf(path, sizeof path, "/jobs/%s", id);
    json_t *j = get_json(&D, path, 200);
    const char *v = json_string_value(json_object_get(j, key));
    snprintf(value, sizeof value, "%s", v ? v : "(null)");
    json_decref(j);
    return value;
}

static void cancel(const char *id)
{
    char path[128];
    struct http_reply r;
    snprintf(path, sizeof path, "/jobs/%s/cancel", id);
    cr_assert(http(&D, "POST", path, NULL, NULL, &r));
    cr_expect_eq(r.status, 202, "%s: %s", path, r.body);
    http_reply_free(&r);
}

Test(device_list, a_list_job_trains_and_get_shows_the_list_and_where_it_ran)
{
    cr_assert(gen_dctaxi(&D, "dev", 500, 1));
    char id[64], path[128];
    submit_job(&D, spec_with(baseline_spec(train_glob(), 5, 64), "\"device\":[\"cuda:63\",\"cpu\"]"),
               id, sizeof id);
    json_t *j = wait_job_done(&D, id, 60);
    cr_expect_str_eq(json_string_value(json_object_get(j, "state")), "succeeded", "%s",
                     json_string_value(json_object_get(json_object_get(j, "error"), "message")));
    const char *dev = json_string_value(json_object_get(j, "device"));
    cr_expect(dev && strncmp(dev, "cpu:", 4) == 0, "ran on %s", dev ? dev : "(null)");
    json_decref(j);
    snprintf(path, sizeof path, "/jobs/%s", id);
    j = get_json(&D, path, 200);
    json_t *list = json_object_get(json_object_get(j, "spec"), "device");
    cr_assert(json_is_array(list) && json_array_size(list) == 2, "spec.device is not the list given");
    cr_expect_str_eq(json_string_value(json_array_get(list, 0)), "cuda:63");
    cr_expect_str_eq(json_string_value(json_array_get(list, 1)), "cpu");
    json_decref(j);
}

Test(device_list, list_jobs_take_free_cpu_workers_then_wait_for_one)
{
    cr_assert(gen_dctaxi(&D, "dev", 2000, 1));
    const char *spec = spec_with(baseline_spec(train_glob(), 100000000, 64), "\"device\":[\"cpu\"]");
    char a[64], b[64], c[64], dev_a[16];
    submit_job(&D, spec, a, sizeof a);
    submit_job(&D, spec, b, sizeof b);
    wait_job_state(&D, a, "running", 30);
    wait_job_state(&D, b, "running", 30);
    snprintf(dev_a, sizeof dev_a, "%s", job_text(a, "device"));
    cr_expect_str_neq(dev_a, job_text(b, "device"), "two jobs on one worker");
    submit_job(&D, spec, c, sizeof c);
    cr_expect_str_eq(job_text(c, "state"), "queued", "both CPU workers are busy");
    cancel(a);
    wait_job_state(&D, c, "running", 30);
    cr_expect_str_eq(job_text(c, "device"), dev_a, "c takes the worker a left");
    cancel(b);
    cancel(c);
    json_decref(wait_job_done(&D, b, 30));
    json_decref(wait_job_done(&D, c, 30));
}

Test(device_list, a_list_of_gpus_traind_lacks_fails_with_device_error)
{
    cr_assert(gen_dctaxi(&D, "dev", 500, 1));
    char id[64];
    submit_job(&D, spec_with(baseline_spec(train_glob(), 5, 64), "\"device\":[\"cuda:62\",\"cuda:63\"]"),
               id, sizeof id);
    json_t *j = wait_job_done(&D, id, 30);
    cr_expect_str_eq(json_string_value(json_object_get(j, "state")), "failed");
    json_t *err = json_object_get(j, "error");
    cr_expect_str_eq(json_string_value(json_object_get(err, "code")), "device_error");
    const char *msg = json_string_value(json_object_get(err, "message"));
    cr_expect(msg && strstr(msg, "cuda:62, cuda:63"), "message: %s", msg ? msg : "(none)");
    cr_expect(json_is_null(json_object_get(j, "device")), "a job that never ran shows no device");
    json_decref(j);
}

Test(device_list, a_gpu_job_under_gpus_none_fails_with_device_error)
{
    cr_assert(gen_dctaxi(&D, "dev", 500, 1));
    json_t *dv = get_json(&D, "/devices", 200);
    json_t *gpus = json_object_get(dv, "gpus");
    for (size_t i = 0; i < json_array_size(gpus); i++)
        cr_expect(json_is_false(json_object_get(json_array_get(gpus, i), "used")),
                  "--gpus none, yet GPU %zu is used", i);
    bool has_gpu0 = json_array_size(gpus) > 0;
    json_decref(dv);
    char id[64];
    submit_job(&D, spec_with(baseline_spec(train_glob(), 5, 64), "\"device\":\"cuda:0\""), id, sizeof id);
    json_t *j = wait_job_done(&D, id, 30);
    json_t *err = json_object_get(j, "error");
    cr_expect_str_eq(json_string_value(json_object_get(err, "code")), "device_error");
    const char *msg = json_string_value(json_object_get(err, "message"));
    cr_expect(msg && strstr(msg, has_gpu0 ? "--gpus" : "no such GPU"), "message: %s", msg ? msg : "(none)");
    json_decref(j);
}

Test(device_list, bad_lists_are_refused_naming_the_element)
{
    cr_assert(gen_dctaxi(&D, "dev", 500, 1));
    static const char *const lists[][2] = {
        {"\"device\":[]", "device"},
        {"\"device\":[\"cpu\",\"auto\"]", "device[1]"},
        {"\"device\":[\"cuda:1\",\"cuda:1\"]", "device[1]"},
        {"\"device\":[\"cpu\",\"cuda:x\"]", "device[1]"},
    };
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        struct http_reply r;
        cr_assert(http(&D, "POST", "/jobs", "application/json",
                       spec_with(baseline_spec(train_glob(), 5, 64), lists[i][0]), &r));
        cr_expect_eq(r.status, 400, "%s: %s", lists[i][0], r.body);
        json_t *err = json_object_get(r.json, "error");
        cr_expect_str_eq(json_string_value(json_object_get(err, "code")), "invalid_spec");
        cr_expect_str_eq(json_string_value(json_object_get(err, "field")), lists[i][1], "%s", lists[i][0]);
        http_reply_free(&r);
    }
}

Test(device_list, a_bad_gpus_flag_stops_traind_with_a_message)
{
    static char out[1024];
    const char *args[] = {"--gpus", "0,,1", "--version", NULL};
    cr_expect_neq(run_traind(args, out, sizeof out), 0, "traind took --gpus 0,,1: %s", out);
    cr_expect(strstr(out, "--gpus") != NULL, "%s", out);
}
