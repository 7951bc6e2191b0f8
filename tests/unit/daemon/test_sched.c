/*
 * test_sched.c — the scheduler's health check (workers that stop beating make the daemon
 * unhealthy) and its GPU workers where the GPU cannot be opened.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "scheduler.h"

struct fixture {
    uv_loop_t loop;
    struct job_registry *reg;
    struct sched *s;
};

static void start(struct fixture *f, int64_t timeout_ms)
{
    struct err e = {0};
    cr_assert_eq(uv_loop_init(&f->loop), 0);
    f->reg = job_registry_new(&e);
    struct sched_config c = {.cpu_workers = 2, .heartbeat_timeout_ms = timeout_ms};
    cr_assert_eq(sched_start(&f->loop, f->reg, &c, &f->s, &e), 0, "%s", e.msg);
}

static void stop(struct fixture *f)
{
    sched_shutdown(f->s);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    sched_free(f->s);
    job_registry_free(f->reg);
    cr_expect_eq(uv_loop_close(&f->loop), 0);
}

Test(sched, idle_workers_beat_often_enough_for_the_default_timeout)
{
    struct fixture f;
    start(&f, 0);
    usleep(50 * 1000);
    cr_expect(sched_check_heartbeats(f.s));
    stop(&f);
}

Test(sched, a_worker_silent_past_the_timeout_makes_the_check_fail)
{
    /* Idle workers beat once a second, so with a 20 ms timeout they soon look silent. */
    struct fixture f;
    start(&f, 20);
    int healthy = 1;
    for (int i = 0; i < 300 && healthy; i++) {
        usleep(10 * 1000);
        healthy = sched_check_heartbeats(f.s);
    }
    cr_expect(!healthy, "no worker ever looked silent");
    stop(&f);
}

/*
 * A GPU worker whose backend cannot be made (this build has no CUDA, or there is no
 * cuda:63): jobs that name it fail with ERR_DEVICE; auto jobs go to the CPU.
 */
static void start_with_broken_gpu(struct fixture *f, struct devices_info *dv)
{
    struct err e = {0};
    memset(dv, 0, sizeof *dv);
    dv->n_gpus = 1;
    dv->gpus[0].index = 63;
    dv->gpus[0].used = true;
    cr_assert_eq(uv_loop_init(&f->loop), 0);
    f->reg = job_registry_new(&e);
    struct sched_config c = {.cpu_workers = 1, .devices = dv};
    cr_assert_eq(sched_start(&f->loop, f->reg, &c, &f->s, &e), 0, "%s", e.msg);
}

/* A job of no data (it fails once started) with the spec's other members, JSON. */
static struct job *add_job_with(struct fixture *f, const char *members)
{
    char text[256];
    snprintf(text, sizeof text, "{\"data\":{\"train\":\"/nonexistent/part*.csv\"},\"iterations\":1,%s}",
             members);
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    struct job_spec *spec;
    struct spec_error se;
    cr_assert_eq(spec_parse(root, &spec, &se), 0, "%s: %s", se.field, se.message);
    json_decref(root);
    struct err e = {0};
    struct job *j = job_registry_add(f->reg, spec, &e);
    cr_assert_not_null(j, "%s", e.msg);
    return j;
}

/* device is JSON: "\"cpu\"" or "[\"cuda:1\",\"cpu\"]". */
static struct job *add_job_json(struct fixture *f, const char *device)
{
    char members[128];
    snprintf(members, sizeof members, "\"device\":%s", device);
    return add_job_with(f, members);
}

static struct job *add_job(struct fixture *f, const char *device)
{
    char quoted[64];
    snprintf(quoted, sizeof quoted, "\"%s\"", device);
    return add_job_json(f, quoted);
}

static void run_until_ended(struct fixture *f, struct job *j)
{
    for (int i = 0; i < 1000 && job_state(j) != JOB_FAILED && job_state(j) != JOB_SUCCEEDED; i++) {
        uv_run(&f->loop, UV_RUN_NOWAIT);
        usleep(5 * 1000);
    }
    cr_assert_eq(job_state(j), JOB_FAILED, "the job is %s", job_state_name(job_state(j)));
}

Test(sched, a_job_on_a_gpu_whose_backend_failed_fails_with_device_error)
{
    struct fixture f;
    struct devices_info dv;
    start_with_broken_gpu(&f, &dv);
    struct job *j = add_job(&f, "cuda:63");
    sched_kick(f.s);
    run_until_ended(&f, j);
    cr_expect_eq(job_error(j)->code, ERR_DEVICE, "%s", job_error(j)->msg);
    cr_expect_str_eq(job_device(j), "cuda:63");
    stop(&f);
}

Test(sched, an_auto_job_skips_a_gpu_whose_backend_failed)
{
    struct fixture f;
    struct devices_info dv;
    start_with_broken_gpu(&f, &dv);
    struct job *j = add_job(&f, "auto");
    sched_kick(f.s);
    run_until_ended(&f, j);   /* its data does not exist; it fails on the CPU */
    cr_expect_str_eq(job_device(j), "cpu");
    cr_expect_neq(job_error(j)->code, ERR_DEVICE, "%s", job_error(j)->msg);
    stop(&f);
}

Test(sched, a_job_on_a_gpu_there_is_no_worker_for_fails_at_once)
{
    struct fixture f;
    start(&f, 0);
    struct job *j = add_job(&f, "cuda:1");
    sched_kick(f.s);
    cr_expect_eq(job_state(j), JOB_FAILED);
    cr_expect_eq(job_error(j)->code, ERR_DEVICE);
    cr_expect_str_eq(job_error(j)->msg, "cuda:1: no such GPU (this machine has 0)");
    stop(&f);
}

Test(sched, with_every_worker_busy_a_job_no_worker_can_run_still_fails_at_once)
{
    struct fixture f;
    struct devices_info dv;
    start_with_broken_gpu(&f, &dv);
    struct job *on_cpu = add_job(&f, "cpu"), *on_gpu = add_job(&f, "cuda:63");
    sched_kick(f.s);   /* both workers take one; they stay busy until the loop hears back */
    cr_assert_eq(job_state(on_cpu), JOB_RUNNING);
    cr_assert_eq(job_state(on_gpu), JOB_RUNNING);
    struct job *waits = add_job(&f, "cpu"), *never = add_job(&f, "cuda:5");
    sched_kick(f.s);
    cr_expect_eq(job_state(waits), JOB_QUEUED);
    cr_expect_eq(job_state(never), JOB_FAILED);
    cr_expect_str_eq(job_error(never)->msg, "cuda:5: no such GPU (this machine has 1)");
    run_until_ended(&f, waits);   /* it starts once the CPU worker is free (and fails: no data) */
    cr_expect_str_eq(job_device(waits), "cpu");
    stop(&f);
}

Test(sched, a_list_job_skips_a_gpu_whose_backend_failed_for_the_cpu_it_lists)
{
    struct fixture f;
    struct devices_info dv;
    start_with_broken_gpu(&f, &dv);
    struct job *j = add_job_json(&f, "[\"cuda:63\",\"cpu\"]");
    sched_kick(f.s);
    run_until_ended(&f, j);   /* its data does not exist; it fails on the CPU */
    cr_expect_str_eq(job_device(j), "cpu");
    cr_expect_neq(job_error(j)->code, ERR_DEVICE, "%s", job_error(j)->msg);
    stop(&f);
}

Test(sched, a_list_job_whose_every_gpu_failed_fails_with_device_error_at_once)
{
    struct fixture f;
    struct devices_info dv;
    start_with_broken_gpu(&f, &dv);
    struct job *j = add_job_json(&f, "[\"cuda:63\"]");
    sched_kick(f.s);
    cr_expect_eq(job_state(j), JOB_FAILED);
    cr_expect_eq(job_error(j)->code, ERR_DEVICE, "%s", job_error(j)->msg);
    cr_expect_str_eq(job_device(j), "", "it never ran");
    stop(&f);
}

Test(sched, a_list_job_of_missing_gpus_fails_at_once_naming_them)
{
    struct fixture f;
    start(&f, 0);
    struct job *j = add_job_json(&f, "[\"cuda:1\",\"cuda:0\"]");
    sched_kick(f.s);
    cr_expect_eq(job_state(j), JOB_FAILED);
    cr_expect_eq(job_error(j)->code, ERR_DEVICE);
    cr_expect_str_eq(job_error(j)->msg, "cuda:1, cuda:0: no such GPU (this machine has 0)");
    stop(&f);
}

/* --gpus: a GPU found but not used has no worker, so jobs naming it fail and auto never gets it. */
static void start_with_unused_gpu(struct fixture *f, struct devices_info *dv)
{
    struct err e = {0};
    memset(dv, 0, sizeof *dv);
    dv->n_gpus = 1;
    dv->gpus[0].index = 0;
    dv->gpus[0].used = false;
    cr_assert_eq(uv_loop_init(&f->loop), 0);
    f->reg = job_registry_new(&e);
    struct sched_config c = {.cpu_workers = 1, .devices = dv};
    cr_assert_eq(sched_start(&f->loop, f->reg, &c, &f->s, &e), 0, "%s", e.msg);
}

Test(sched, a_gpu_left_out_by_gpus_gets_no_worker)
{
    struct fixture f;
    struct devices_info dv;
    start_with_unused_gpu(&f, &dv);
    struct job *j = add_job(&f, "cuda:0");
    sched_kick(f.s);
    cr_expect_eq(job_state(j), JOB_FAILED);
    cr_expect_eq(job_error(j)->code, ERR_DEVICE);
    cr_expect_str_eq(job_error(j)->msg, "cuda:0: traind does not use this GPU (--gpus leaves it out)");
    struct job *a = add_job(&f, "auto");
    sched_kick(f.s);
    run_until_ended(&f, a);
    cr_expect_str_eq(job_device(a), "cpu");
    stop(&f);
}

static struct job *add_job_priority(struct fixture *f, int priority)
{
    char members[64];
    snprintf(members, sizeof members, "\"device\":\"cpu\",\"priority\":%d", priority);
    return add_job_with(f, members);
}

Test(sched, free_workers_take_the_highest_priority_then_the_oldest)
{
    struct fixture f;
    start(&f, 0);   /* two CPU workers */
    struct job *low = add_job_priority(&f, 0), *high = add_job_priority(&f, 5),
               *high_later = add_job_priority(&f, 5), *highest_last = add_job_priority(&f, 9);
    sched_kick(f.s);
    cr_expect_eq(job_state(highest_last), JOB_RUNNING);
    cr_expect_eq(job_state(high), JOB_RUNNING);
    cr_expect_eq(job_state(high_later), JOB_QUEUED);
    cr_expect_eq(job_state(low), JOB_QUEUED);
    stop(&f);
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * A measurement, not a check: what sched_kick costs with 10,000 jobs queued behind busy
 * workers, as after a submission, and what a freed worker's kick costs to start the next.
 */
Test(sched, kicks_with_ten_thousand_queued_jobs_are_timed, .timeout = 120)
{
    struct fixture f;
    struct devices_info dv;
    start_with_broken_gpu(&f, &dv);
    struct job *on_cpu = add_job(&f, "cpu");
    add_job(&f, "cuda:63");
    sched_kick(f.s);
    for (int i = 0; i < 10000; i++)
        add_job(&f, "cpu");
    sched_kick(f.s);
    enum { KICKS = 200 };
    double submit = 0;
    for (int i = 0; i < KICKS; i++) {
        add_job(&f, "cpu");
        double t0 = mono_s();
        sched_kick(f.s);
        submit += mono_s() - t0;
    }
    run_until_ended(&f, on_cpu);   /* the loop applied its end: the next job took its worker */
    double t0 = mono_s();
    for (int i = 0; i < KICKS; i++)
        sched_kick(f.s);
    double idle = mono_s() - t0;
    fprintf(stderr, "sched_kick with 10000 queued, workers busy: after a submission %.1f us, "
            "with nothing new %.1f us\n", submit / KICKS * 1e6, idle / KICKS * 1e6);
    stop(&f);
}
