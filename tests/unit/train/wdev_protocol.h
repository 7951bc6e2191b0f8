/* wdev_protocol.h — wdev's upload protocol tests (train/wdev.h), the same on every backend: the includer defines open_or_skip(), which opens a wdev and fills the fixture. */
#ifndef TRAIND_TESTS_WDEV_PROTOCOL_H
#define TRAIND_TESTS_WDEV_PROTOCOL_H

#include <criterion/criterion.h>
#include <string.h>

#include "backend.h"
#include "wdev.h"

enum { ROWS = 1000, BYTES = ROWS * sizeof(double) };

struct fixture {
    struct wdev *d;
    const struct backend *be;
    struct wdev_upload *u;
    const struct prefetch_allocator *ring;
    double *slot[2];   /* pinned, as the prefetch ring's */
};

static struct fixture open_or_skip(void);

/* A wdev of factory's device 0 with an upload of BYTES and two ring slots: what open_or_skip returns. */
static struct fixture fixture_open(const struct backend_factory *factory)
{
    struct fixture f = {0};
    struct err e = {0};
    cr_assert_eq(wdev_open(factory, 0, &f.d, &e), 0, "%s", e.msg);
    f.be = wdev_backend(f.d);
    cr_assert_eq(wdev_upload_new(f.d, BYTES, &f.u, &e), 0, "%s", e.msg);
    f.ring = wdev_ring_allocator(f.d);
    for (int i = 0; i < 2; i++)
        cr_assert_not_null(f.slot[i] = f.ring->alloc(f.ring->ctx, BYTES));
    return f;
}

static void close_fixture(struct fixture *f)
{
    wdev_upload_free(f->u);   /* waits for a copy still reading a slot */
    for (int i = 0; i < 2; i++)
        f->ring->free(f->ring->ctx, f->slot[i]);
    wdev_close(f->d);
}

/* wdev and the daemon reach the device through these alone: none may be missing. */
Test(wdev, the_backend_fills_every_memory_and_stream_entry)
{
    struct fixture f = open_or_skip();
    const struct backend *be = f.be;
    cr_expect(be->host_alloc && be->host_free && be->event_new && be->event_free &&
              be->upload_async && be->upload_start && be->compute_wait && be->compute_record &&
              be->event_query && be->synchronize && be->copy_on_device && be->memory_stats &&
              be->empty_cache && be->free_memory && be->alloc_spare && be->alloc_size &&
              be->set_reclaim);
    close_fixture(&f);
}

static void fill(double *p, double v)
{
    for (int i = 0; i < ROWS; i++)
        p[i] = v + i;
}

/* Whether the device buffer dst holds fill(v)'s values (read on the compute stream). */
static bool holds(const struct fixture *f, const void *dst, double v)
{
    static double got[ROWS];
    struct err e = {0};
    cr_assert_eq(f->be->to_host(f->be, got, dst, BYTES, &e), 0, "%s", e.msg);
    for (int i = 0; i < ROWS; i++)
        if (got[i] != v + i)
            return false;
    return true;
}

Test(wdev, the_next_batch_goes_to_the_other_buffer_and_the_step_still_reads_its_own)
{
    struct fixture f = open_or_skip();
    struct err e = {0};
    void *a, *b;
    fill(f.slot[0], 100);
    cr_assert_eq(wdev_upload_start(f.u, f.slot[0], BYTES, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_finish(f.u, &a, &e), 0, "%s", e.msg);
    fill(f.slot[1], 200);
    cr_assert_eq(wdev_upload_start(f.u, f.slot[1], BYTES, &e), 0, "%s", e.msg);
    cr_expect(holds(&f, a, 100), "the step's batch changed under it");
    cr_assert_eq(wdev_upload_step_done(f.u, a, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_finish(f.u, &b, &e), 0, "%s", e.msg);
    cr_expect_neq(a, b, "two batches in one buffer");
    cr_expect(holds(&f, b, 200));
    /* The third batch reuses the first buffer, after its reader. */
    fill(f.slot[0], 300);
    void *c;
    cr_assert_eq(wdev_upload_start(f.u, f.slot[0], BYTES, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_step_done(f.u, b, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_finish(f.u, &c, &e), 0, "%s", e.msg);
    cr_expect_eq(c, a);
    cr_expect(holds(&f, c, 300));
    close_fixture(&f);
}

/* Evaluation between two steps: the batch the next step reads is already on the device. */
Test(wdev, an_evaluation_upload_leaves_the_next_steps_batch_alone)
{
    struct fixture f = open_or_skip();
    struct err e = {0};
    void *next, *ev;
    fill(f.slot[0], 10);
    cr_assert_eq(wdev_upload_start(f.u, f.slot[0], BYTES, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_finish(f.u, &next, &e), 0, "%s", e.msg);
    for (int k = 0; k < 3; k++) {
        fill(f.slot[1], 1000 + k);
        cr_assert_eq(wdev_upload(f.u, f.slot[1], BYTES, &ev, &e), 0, "%s", e.msg);
        cr_expect(holds(&f, ev, 1000 + k));
    }
    cr_expect_neq(ev, next);
    cr_expect(holds(&f, next, 10), "the evaluation overwrote the next step's batch");
    /* The batch after that goes where the evaluation's were. */
    void *after;
    fill(f.slot[1], 20);
    cr_assert_eq(wdev_upload_start(f.u, f.slot[1], BYTES, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_step_done(f.u, next, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_finish(f.u, &after, &e), 0, "%s", e.msg);
    cr_expect_eq(after, ev);
    cr_expect(holds(&f, after, 20));
    cr_expect(holds(&f, next, 10));
    close_fixture(&f);
}

Test(wdev, out_of_order_calls_are_internal_errors)
{
    struct fixture f = open_or_skip();
    struct err e = {0};
    void *dst;
    cr_expect_eq(wdev_upload_finish(f.u, &dst, &e), ERR_INTERNAL, "a finish without a start");
    err_clear(&e);
    cr_assert_eq(wdev_upload_start(f.u, f.slot[0], BYTES, &e), 0, "%s", e.msg);
    cr_expect_eq(wdev_upload_start(f.u, f.slot[1], BYTES, &e), ERR_INTERNAL, "a second start");
    err_clear(&e);
    cr_expect_eq(wdev_upload(f.u, f.slot[1], BYTES, &dst, &e), ERR_INTERNAL, "an evaluation mid-start");
    err_clear(&e);
    cr_expect_eq(wdev_upload_step_done(f.u, f.slot[1], &e), ERR_INTERNAL, "a step on host memory");
    err_clear(&e);
    cr_expect_eq(wdev_upload_start(f.u, f.slot[1], BYTES + 1, &e), ERR_INTERNAL, "a batch too big");
    close_fixture(&f);   /* the first start is still unfinished: freeing waits for its copy */
}

/* A job that fails with a copy in flight: its ring slot may be freed once abandoned. */
Test(wdev, an_abandoned_copy_no_longer_reads_its_slot)
{
    struct fixture f = open_or_skip();
    struct err e = {0};
    fill(f.slot[0], 5);
    cr_assert_eq(wdev_upload_start(f.u, f.slot[0], BYTES, &e), 0, "%s", e.msg);
    wdev_upload_abandon(f.u);
    f.ring->free(f.ring->ctx, f.slot[0]);   /* the emulation aborts if a queued copy still reads it */
    cr_assert_not_null(f.slot[0] = f.ring->alloc(f.ring->ctx, BYTES));
    void *dst;
    fill(f.slot[0], 6);
    cr_assert_eq(wdev_upload_start(f.u, f.slot[0], BYTES, &e), 0, "after the abandon: %s", e.msg);
    cr_assert_eq(wdev_upload_finish(f.u, &dst, &e), 0, "%s", e.msg);
    cr_expect(holds(&f, dst, 6));
    close_fixture(&f);
}

#endif
