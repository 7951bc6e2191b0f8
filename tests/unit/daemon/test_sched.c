/* test_sched.c — the scheduler's health check: workers that stop beating make the daemon unhealthy. */
#include <criterion/criterion.h>
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
