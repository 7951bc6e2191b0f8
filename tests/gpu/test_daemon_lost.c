/*
 * test_daemon_lost.c — a GPU that faults mid-job, through the real daemon over the host emulation
 * (gpu-emu only: TRAIND_EMU_FAULT_AFTER_LAUNCHES makes a kernel fault as an illegal address would,
 * and the emulated context is lost for good, as CUDA's is). The job fails with device_error and
 * CUDA's words, the GPU says why in /devices, "auto" jobs go to the CPU, jobs naming the GPU fail
 * at once, and the daemon keeps serving and stops cleanly.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "jobs.h"

static struct daemon_proc D;

/* Enough launches for the model's init and a few steps of the baseline, then the fault. */
#define FAULT_AFTER "300"
/* Steps a job asks for: far more than FAULT_AFTER launches, however few a step takes. */
#define ITERATIONS 400

static void setup(void)
{
    cr_assert_eq(setenv("TRAIND_EMU_FAULT_AFTER_LAUNCHES", FAULT_AFTER, 1), 0); /* inherited by traind */
    cr_assert(daemon_start(&D), "traind did not start (see its log under /tmp/traind-it-*)");
}

static void teardown(void)
{
    daemon_stop_clean(&D);
}

TestSuite(gpu_lost, .init = setup, .fini = teardown, .timeout = 240);

static const char *train_glob(void)
{
    static char train[512];
    snprintf(train, sizeof train, "%s/dev/part*.csv", D.dir);
    return train;
}

/* Submits the baseline on device, waits for it, and checks its end state and (when failed) message. */
static void run_expect(const char *device, const char *state, const char *ran_on, const char *message_part)
{
    char member[64], id[64];
    snprintf(member, sizeof member, "\"device\":\"%s\"", device);
    submit_job(&D, spec_with(baseline_spec(train_glob(), ITERATIONS, 64), member), id, sizeof id);
    json_t *j = wait_job_done(&D, id, 120);
    json_t *err = json_object_get(j, "error");
    const char *msg = json_string_value(json_object_get(err, "message"));
    cr_assert_str_eq(json_string_value(json_object_get(j, "state")), state, "job on %s: %s", device,
                     msg ? msg : "(no error)");
    cr_expect_str_eq(json_string_value(json_object_get(j, "device")), ran_on, "job on %s", device);
    if (message_part) {
        cr_expect_str_eq(json_string_value(json_object_get(err, "code")), "device_error", "job on %s", device);
        cr_expect(msg && strstr(msg, message_part), "job on %s: '%s' lacks '%s'", device, msg, message_part);
    }
    json_decref(j);
}

Test(gpu_lost, a_fault_fails_the_job_and_takes_the_gpu_out_of_service_until_restart)
{
    cr_assert(gen_dctaxi(&D, "dev", 1000, 1));
    run_expect("cuda:0", "failed", "cuda:0", "illegal memory access");

    json_t *d = get_json(&D, "/devices", 200);
    json_t *g = json_array_get(json_object_get(d, "gpus"), 0);
    const char *why = json_string_value(json_object_get(g, "error"));
    cr_assert(why && strstr(why, "context is lost") && strstr(why, "illegal memory access"),
              "/devices says '%s'", why ? why : "(null)");
    json_decref(d);

    run_expect("auto", "succeeded", "cpu", NULL);
    run_expect("cuda:0", "failed", "cuda:0", "context is lost");
    json_decref(get_json(&D, "/healthz", 200));
    cr_expect(daemon_log_contains(&D, "traind must restart to train on it"), "the log says what to do");
}
