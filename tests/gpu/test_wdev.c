/* test_wdev.c — a GPU job's batch uploads (train/wdev.h): two buffers, the copy of the next batch under the step. */
#include <criterion/criterion.h>
#include <string.h>

#include "alloc.h"
#include "be_cuda.h"
#include "device.h"
#include "gpu_test.h"
#include "wdev.h"
#include "wdev_protocol.h"

static struct fixture open_or_skip(void)
{
    char why[256] = "";
    int n = 0;
    cr_assert_eq(gpu_device_count(&n, why, sizeof why), 0);
    if (n == 0)
        cr_skip_test("no GPU on this machine (%s): the GPU suite runs on a CUDA device only", why);
    return fixture_open(be_cuda_factory());
}

/* The device cache: a kept batch is a copy of its own, found by index and rows. */
Test(wdev, a_kept_batch_is_a_copy_found_by_its_index_and_rows)
{
    struct fixture f = open_or_skip();
    struct err e = {0};
    struct wdev_cache *c;
    void *dst;
    cr_assert_eq(wdev_cache_new(f.d, &c, &e), 0, "%s", e.msg);
    fill(f.slot[0], 7);
    cr_assert_eq(wdev_upload_start(f.u, f.slot[0], BYTES, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_finish(f.u, &dst, &e), 0, "%s", e.msg);
    bool kept = false;
    cr_assert_eq(wdev_cache_put(c, 3, dst, ROWS, BYTES, &kept, &e), 0, "%s", e.msg);
    cr_expect(kept);
    /* The buffer is reused for the next batch; the kept copy stays. */
    fill(f.slot[1], 8);
    void *next;
    cr_assert_eq(wdev_upload_start(f.u, f.slot[1], BYTES, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_step_done(f.u, dst, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_finish(f.u, &next, &e), 0, "%s", e.msg);
    fill(f.slot[0], 9);
    cr_assert_eq(wdev_upload_start(f.u, f.slot[0], BYTES, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_step_done(f.u, next, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_finish(f.u, &next, &e), 0, "%s", e.msg);
    cr_expect_eq(next, dst, "the first buffer again");
    void *got = wdev_cache_get(c, 3, ROWS);
    cr_assert_not_null(got);
    cr_expect_neq(got, dst);
    cr_expect(holds(&f, got, 7), "the kept copy changed with its buffer");
    cr_expect_null(wdev_cache_get(c, 3, ROWS - 1), "a batch of other rows is not this one");
    cr_expect_null(wdev_cache_get(c, 2, ROWS));
    cr_expect_null(wdev_cache_get(c, 1000, ROWS));
    size_t bytes;
    cr_expect_eq(wdev_cache_count(c, &bytes), 1);
    cr_expect_eq(bytes, gpu_alloc_round(BYTES), "the bytes of the block it holds");
    wdev_cache_free(c);
    close_fixture(&f);
}

/* A label check still unread when a job ends (its step failed on something else) is drained
 * by wdev_job_end, so the worker's next job never sees the last job's bad label. */
Test(wdev, a_label_check_left_by_a_failed_job_does_not_reach_the_next_job)
{
    struct fixture f = open_or_skip();
    struct err e = {0};
    const int64_t sh[] = {4, 3}, n[] = {4}, one[] = {1};
    const double logits[12] = {0}, labels[4] = {0, 1, 7, 2};
    struct tensor *x = tensor_on(f.be, TENSOR_F64, 2, sh, logits),
                  *l = tensor_on(f.be, TENSOR_F64, 1, n, labels),
                  *o = tensor_on(f.be, TENSOR_F64, 1, one, NULL);
    cr_assert(x && l && o);
    cr_assert_eq(f.be->k->xent(f.be, x, l, o, &e), 0, "%s", e.msg);   /* queued, unread */
    cr_assert_eq(wdev_job_end(f.d, &e), 0, "%s", e.msg);
    double v;
    cr_expect_eq(tensor_item(o, &v, &e), 0, "the next job's first read: %s", e.msg);
    tensor_free(x);
    tensor_free(l);
    tensor_free(o);
    close_fixture(&f);
}

/*
 * A step that runs out of device memory while batches are kept: those are dropped, but for
 * the two handed out last (the step's batch and the one fetched ahead, which later kernels
 * read), and the step's allocation succeeds. Sizes are fractions of the device's free memory,
 * measured just before each request; the request needs one of the two dropped batches, so
 * another process may take or give back up to a batch meanwhile (meson.build runs this
 * program alone, one test at a time). What the drop gives back is checked in the allocator's
 * own figures, which no other process changes.
 */
Test(wdev, out_of_memory_drops_the_kept_batches_but_the_two_in_use_and_the_allocation_succeeds)
{
    struct fixture f = open_or_skip();
    struct err e = {0};
    size_t free0;
    cr_assert_eq(be_cuda_free_memory(f.be, &free0, &e), 0, "%s", e.msg);
    struct wdev_cache *c;
    cr_assert_eq(wdev_cache_new(f.d, &c, &e), 0, "%s", e.msg);
    size_t big = gpu_alloc_round(free0 / 8 < ((size_t)256 << 20) ? free0 / 8 : (size_t)256 << 20);
    void *src = f.be->alloc(f.be, big, &e);
    cr_assert_not_null(src, "%s", e.msg);
    for (uint64_t i = 0; i < 4; i++) {
        bool kept = false;
        cr_assert_eq(wdev_cache_put(c, i, src, 1, big, &kept, &e), 0, "%s", e.msg);
        cr_assert(kept, "batch %llu", (unsigned long long)i);
    }
    f.be->free(f.be, src);
    cr_assert_eq(be_cuda_empty_cache(f.be, &e), 0, "%s", e.msg);
    cr_assert_not_null(wdev_cache_get(c, 1, 1));   /* the step's batch */
    cr_assert_not_null(wdev_cache_get(c, 2, 1));   /* the one fetched ahead */
    struct gpu_mem_stats st;
    be_cuda_memory_stats(f.be, &st);
    size_t in_use = st.reserved - 2 * big;   /* the fixture's batch buffers and the two batches */
    size_t free1;
    cr_assert_eq(be_cuda_free_memory(f.be, &free1, &e), 0, "%s", e.msg);
    size_t ask = free1 + big;   /* fits once batches 0 and 3 are gone */
    void *p = f.be->alloc(f.be, ask, &e);
    cr_expect_not_null(p, "%s", e.msg);
    be_cuda_memory_stats(f.be, &st);
    cr_expect_eq(st.reserved, in_use + (p ? gpu_alloc_round(ask) : 0),
                 "reserved after the drop: %zu, not what is in use (%zu) and the request", st.reserved,
                 in_use);
    cr_expect_null(wdev_cache_get(c, 0, 1), "batch 0 was dropped");
    cr_expect_null(wdev_cache_get(c, 3, 1), "batch 3 was dropped");
    cr_expect_not_null(wdev_cache_get(c, 1, 1), "the step's batch stays");
    cr_expect_not_null(wdev_cache_get(c, 2, 1), "the batch ahead stays");
    size_t bytes;
    cr_expect_eq(wdev_cache_count(c, &bytes), 2);
    cr_expect_eq(bytes, 2 * big);
    f.be->free(f.be, p);
    cr_assert_eq(be_cuda_empty_cache(f.be, &e), 0, "%s", e.msg);
    be_cuda_memory_stats(f.be, &st);
    cr_expect_eq(st.reserved, in_use, "reserved after the drop: %zu, not what is in use (%zu)", st.reserved,
                 in_use);
    bool kept = true;
    cr_assert_eq(wdev_cache_put(c, 4, wdev_cache_get(c, 1, 1), 1, big, &kept, &e), 0, "%s", e.msg);
    cr_expect(!kept, "nothing more is kept after a drop");
    /* With nothing left to drop, running out is still ERR_OUT_OF_MEMORY. */
    cr_assert_eq(be_cuda_empty_cache(f.be, &e), 0, "%s", e.msg);
    cr_assert_eq(be_cuda_free_memory(f.be, &free1, &e), 0, "%s", e.msg);
    cr_expect_null(f.be->alloc(f.be, free1 + 3 * big, &e));
    cr_expect_eq(e.code, ERR_OUT_OF_MEMORY, "%s", e.msg);
    wdev_cache_free(c);
    close_fixture(&f);
}
