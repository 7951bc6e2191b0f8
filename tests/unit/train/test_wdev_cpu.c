/* test_wdev_cpu.c — a worker's device (train/wdev.h) over the CPU backend: the upload protocol through core's table alone. */
#include <criterion/criterion.h>
#include <string.h>

#include "backend.h"
#include "wdev.h"

enum { ROWS = 100, BYTES = ROWS * sizeof(double) };

static int cpu_create(int index, const struct backend **out, struct err *e)
{
    *out = be_cpu();
    return 0;
}

static void cpu_destroy(const struct backend *be) {}

static const struct backend_factory cpu_factory = {
    .kind = "cpu", .create = cpu_create, .destroy = cpu_destroy,
};

struct fixture {
    struct wdev *d;
    struct wdev_upload *u;
    const struct prefetch_allocator *ring;
    double *slot[2];
};

static struct fixture open_cpu(void)
{
    struct fixture f = {0};
    struct err e = {0};
    cr_assert_eq(wdev_open(&cpu_factory, 0, &f.d, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_backend(f.d), be_cpu());
    cr_assert_eq(wdev_upload_new(f.d, BYTES, &f.u, &e), 0, "%s", e.msg);
    f.ring = wdev_ring_allocator(f.d);
    for (int i = 0; i < 2; i++)
        cr_assert_not_null(f.slot[i] = f.ring->alloc(f.ring->ctx, BYTES));
    return f;
}

static void close_fixture(struct fixture *f)
{
    wdev_upload_free(f->u);
    for (int i = 0; i < 2; i++)
        f->ring->free(f->ring->ctx, f->slot[i]);
    wdev_close(f->d);
}

static void fill(double *p, double v)
{
    for (int i = 0; i < ROWS; i++)
        p[i] = v + i;
}

static bool holds(const void *dst, double v)
{
    const double *p = dst;
    for (int i = 0; i < ROWS; i++)
        if (p[i] != v + i)
            return false;
    return true;
}

Test(wdev_cpu, the_cpu_backend_fills_every_memory_and_stream_entry)
{
    const struct backend *be = be_cpu();
    cr_expect(be->host_alloc && be->host_free && be->event_new && be->event_free &&
              be->upload_async && be->upload_start && be->compute_wait && be->compute_record &&
              be->event_query && be->synchronize && be->copy_on_device && be->memory_stats &&
              be->empty_cache && be->free_memory && be->alloc_spare && be->alloc_size &&
              be->set_reclaim);
}

Test(wdev_cpu, without_a_factory_a_gpu_worker_has_no_device)
{
    struct wdev *d = (struct wdev *)1;
    struct err e = {0};
    cr_expect_eq(wdev_open(NULL, 2, &d, &e), ERR_DEVICE);
    cr_expect_null(d);
    cr_expect_str_eq(e.msg, "cuda:2: this traind was built without CUDA");
}

/* The look-ahead's protocol on a backend whose copies are done on return: two buffers still. */
Test(wdev_cpu, the_next_batch_goes_to_the_other_buffer_and_the_step_still_reads_its_own)
{
    struct fixture f = open_cpu();
    struct err e = {0};
    void *a, *b, *c;
    fill(f.slot[0], 100);
    cr_assert_eq(wdev_upload_start(f.u, f.slot[0], BYTES, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_finish(f.u, &a, &e), 0, "%s", e.msg);
    fill(f.slot[1], 200);
    cr_assert_eq(wdev_upload_start(f.u, f.slot[1], BYTES, &e), 0, "%s", e.msg);
    cr_expect(holds(a, 100), "the step's batch changed under it");
    cr_assert_eq(wdev_upload_step_done(f.u, a, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_finish(f.u, &b, &e), 0, "%s", e.msg);
    cr_expect_neq(a, b, "two batches in one buffer");
    cr_expect(holds(b, 200));
    fill(f.slot[0], 300);
    cr_assert_eq(wdev_upload_start(f.u, f.slot[0], BYTES, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_step_done(f.u, b, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_finish(f.u, &c, &e), 0, "%s", e.msg);
    cr_expect_eq(c, a);
    cr_expect(holds(c, 300));
    close_fixture(&f);
}

Test(wdev_cpu, an_evaluation_upload_leaves_the_next_steps_batch_alone)
{
    struct fixture f = open_cpu();
    struct err e = {0};
    void *next, *ev;
    fill(f.slot[0], 10);
    cr_assert_eq(wdev_upload_start(f.u, f.slot[0], BYTES, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_finish(f.u, &next, &e), 0, "%s", e.msg);
    fill(f.slot[1], 1000);
    cr_assert_eq(wdev_upload(f.u, f.slot[1], BYTES, &ev, &e), 0, "%s", e.msg);
    cr_expect(holds(ev, 1000));
    cr_expect_neq(ev, next);
    cr_expect(holds(next, 10), "the evaluation overwrote the next step's batch");
    close_fixture(&f);
}

Test(wdev_cpu, out_of_order_calls_are_internal_errors)
{
    struct fixture f = open_cpu();
    struct err e = {0};
    void *dst;
    cr_expect_eq(wdev_upload_finish(f.u, &dst, &e), ERR_INTERNAL, "a finish without a start");
    err_clear(&e);
    cr_assert_eq(wdev_upload_start(f.u, f.slot[0], BYTES, &e), 0, "%s", e.msg);
    cr_expect_eq(wdev_upload_start(f.u, f.slot[1], BYTES, &e), ERR_INTERNAL, "a second start");
    err_clear(&e);
    cr_expect_eq(wdev_upload(f.u, f.slot[1], BYTES, &dst, &e), ERR_INTERNAL, "an evaluation mid-start");
    close_fixture(&f);
}

/* Host memory holds the data already: the device cache keeps no second copy, and says so. */
Test(wdev_cpu, the_cache_keeps_nothing_in_host_memory)
{
    struct fixture f = open_cpu();
    struct err e = {0};
    struct wdev_cache *c;
    void *dst;
    cr_assert_eq(wdev_cache_new(f.d, &c, &e), 0, "%s", e.msg);
    fill(f.slot[0], 7);
    cr_assert_eq(wdev_upload_start(f.u, f.slot[0], BYTES, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_finish(f.u, &dst, &e), 0, "%s", e.msg);
    bool kept = true;
    cr_assert_eq(wdev_cache_put(c, 0, dst, ROWS, BYTES, &kept, &e), 0, "%s", e.msg);
    cr_expect_not(kept);
    cr_expect_null(wdev_cache_get(c, 0, ROWS));
    size_t bytes = 1;
    cr_expect_eq(wdev_cache_count(c, &bytes), 0);
    cr_expect_eq(bytes, 0);
    wdev_cache_free(c);
    close_fixture(&f);
}

Test(wdev_cpu, job_end_and_memory_on_the_cpu_are_trivial)
{
    struct fixture f = open_cpu();
    struct err e = {0};
    cr_expect_eq(wdev_job_end(f.d, &e), 0, "%s", e.msg);
    uint64_t allocated = 1, reserved = 1;
    wdev_memory(f.d, &allocated, &reserved);
    cr_expect_eq(allocated, 0);
    cr_expect_eq(reserved, 0);
    close_fixture(&f);
}
