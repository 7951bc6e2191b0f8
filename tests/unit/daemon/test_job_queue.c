/*
 * test_job_queue.c — the registry's queue of queued jobs runs them highest priority first, then
 * oldest (submission order), through every state change: checked against a scan of the registry.
 */
#include <stdio.h>
#include <time.h>

#include "job_helpers.h"

static struct job_registry *registry(void)
{
    struct err e = {0};
    struct job_registry *r = job_registry_new(&e);
    cr_assert_not_null(r, "%s", e.msg);
    return r;
}

static uint64_t rng = 88172645463325252u;

static unsigned next_rand(void)   /* xorshift64: the test's own, so a run repeats */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng >> 32);
}

static struct job *add(struct job_registry *r, int priority)
{
    char text[128];
    snprintf(text, sizeof text, "{\"priority\":%d,\"data\":{\"train\":\"x\"},\"iterations\":1}", priority);
    return new_job(r, text);
}

/* The queued job that runs next, by scanning the whole registry (as the scheduler once did). */
static struct job *scan_first(const struct job_registry *r)
{
    struct job *best = NULL;
    for (size_t i = 0; i < job_registry_count(r); i++) {
        struct job *j = job_registry_at(r, i);
        if (job_state(j) == JOB_QUEUED && (!best || job_spec(j)->priority > job_spec(best)->priority))
            best = j;
    }
    return best;
}

/* The queue's whole order equals the registry's queued jobs stably sorted by priority. */
static void expect_order(struct job_registry *r)
{
    size_t n = job_registry_count(r), k = 0;
    struct job **want = calloc(n + 1, sizeof *want);
    for (int p = SPEC_PRIORITY_MAX; p >= SPEC_PRIORITY_MIN; p--)
        for (size_t i = 0; i < n; i++) {
            struct job *j = job_registry_at(r, i);
            if (job_state(j) == JOB_QUEUED && job_spec(j)->priority == p)
                want[k++] = j;
        }
    size_t got = 0;
    for (struct job *j = job_registry_next_queued(r); j; j = job_registry_queued_after(r, j), got++)
        cr_assert(got < k && j == want[got], "place %zu of %zu in the queue is the wrong job", got, k);
    cr_assert_eq(got, k, "the queue holds %zu jobs, the registry %zu queued", got, k);
    cr_assert_eq(job_registry_next_queued(r), scan_first(r));
    free(want);
}

Test(job_queue, order_matches_a_scan_through_many_jobs_and_state_changes)
{
    static const int prio[] = {SPEC_PRIORITY_MIN, -3, 0, 0, 0, 5, 7, SPEC_PRIORITY_MAX};
    struct job_registry *r = registry();
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 100; i++)
            add(r, prio[next_rand() % 8]);
        for (size_t i = 0; i < job_registry_count(r); i++) {
            struct job *j = job_registry_at(r, i);
            switch (next_rand() % 8) {
            case 0: job_mark_running(j, "cpu"); break;
            case 1: job_pause(j, 0); break;
            case 2: job_resume(j); break;            /* back to its place among the older ones */
            case 3: job_requeue(j, 0); break;
            case 4: if (next_rand() % 4 == 0) job_finish(j, ERR_OK, NULL, NULL); break;
            default: break;
            }
        }
        expect_order(r);
        for (size_t i = 0; i < job_registry_count(r);)   /* removal keeps the others' order */
            if (job_is_terminal(job_state(job_registry_at(r, i))) && next_rand() % 2)
                job_registry_remove(r, job_registry_at(r, i));
            else
                i++;
        expect_order(r);
    }
    job_registry_free(r);
}

Test(job_queue, a_job_queued_again_keeps_its_submission_place)
{
    struct job_registry *r = registry();
    struct job *a = add(r, 1), *b = add(r, 1), *c = add(r, 1);
    job_mark_running(a, "cpu");
    cr_expect_eq(job_registry_next_queued(r), b);
    job_requeue(a, 0);
    cr_expect_eq(job_registry_next_queued(r), a);
    cr_expect_eq(job_registry_queued_after(r, a), b);
    cr_expect_eq(job_registry_queued_after(r, b), c);
    cr_expect_null(job_registry_queued_after(r, c));
    job_registry_free(r);
}

Test(job_queue, queuing_a_job_moves_the_generation_and_starting_one_does_not)
{
    struct job_registry *r = registry();
    uint64_t g0 = job_registry_queued_gen(r);
    struct job *a = add(r, 0);
    uint64_t g1 = job_registry_queued_gen(r);
    cr_expect_neq(g1, g0);
    job_mark_running(a, "cpu");
    cr_expect_eq(job_registry_queued_gen(r), g1);
    job_requeue(a, 0);
    cr_expect_neq(job_registry_queued_gen(r), g1);
    job_registry_free(r);
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A measurement, not a check: the time to pick the next of 10,000 queued jobs, scan vs queue. */
Test(job_queue, picking_among_ten_thousand_queued_jobs_is_timed)
{
    struct job_registry *r = registry();
    for (int i = 0; i < 10000; i++)
        add(r, (int)(next_rand() % 21) - 10);
    enum { PICKS = 1000 };
    struct job *sink = NULL;
    double t0 = seconds();
    for (int i = 0; i < PICKS; i++)
        sink = scan_first(r);
    double t1 = seconds();
    for (int i = 0; i < PICKS; i++)
        sink = job_registry_next_queued(r);
    double t2 = seconds();
    cr_assert_not_null(sink);
    fprintf(stderr, "pick among 10000 queued: registry scan %.2f us, queue %.3f us\n",
            (t1 - t0) / PICKS * 1e6, (t2 - t1) / PICKS * 1e6);
    job_registry_free(r);
}

Test(job_queue, the_jobs_queued_since_a_generation_are_listed_newest_first)
{
    struct job_registry *r = registry();
    struct job *a = add(r, 0);
    uint64_t g = job_registry_queued_gen(r);
    struct job *b = add(r, -5), *c = add(r, 9);
    job_mark_running(a, "cpu");
    job_requeue(a, 0);   /* back in the queue: an arrival again */
    job_mark_running(c, "cpu");
    cr_expect_eq(job_registry_queued_since(r, g), a);
    cr_expect_eq(job_registry_queued_since_next(r, a, g), b);
    cr_expect_null(job_registry_queued_since_next(r, b, g));
    cr_expect_null(job_registry_queued_since(r, job_registry_queued_gen(r)));
    job_registry_free(r);
}
