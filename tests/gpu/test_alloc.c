/* test_alloc.c — the caching allocator (size classes, reuse, OOM), pinned memory, uploads and error messages. */
#include <pthread.h>
#include <stdint.h>

#include "alloc.h"
#include "gpu_test.h"

/* Pure arithmetic: runs on any machine. */
Test(alloc, size_classes_are_512_bytes_below_1mib_and_2mib_above)
{
    cr_expect_eq(gpu_alloc_round(0), 512);
    cr_expect_eq(gpu_alloc_round(1), 512);
    cr_expect_eq(gpu_alloc_round(512), 512);
    cr_expect_eq(gpu_alloc_round(513), 1024);
    cr_expect_eq(gpu_alloc_round((1 << 20) - 1), 1 << 20);
    cr_expect_eq(gpu_alloc_round(1 << 20), 2 << 20);
    cr_expect_eq(gpu_alloc_round((2 << 20) + 1), 4 << 20);
    cr_expect_eq(gpu_alloc_round((size_t)3 << 30), (size_t)3 << 30);
    cr_expect_eq(gpu_alloc_round(SIZE_MAX - 10), 0, "a size that cannot be rounded is refused");
}

Test(alloc, reserved_memory_stays_flat_over_100_alloc_free_cycles)
{
    const struct backend *be = gpu_begin();
    struct err e = {0};
    const size_t sizes[] = {1, 4097, 700000, (3 << 20) + 5};
    struct gpu_mem_stats first, st;
    for (int cycle = 0; cycle < 100; cycle++) {
        void *p[4];
        for (int i = 0; i < 4; i++)
            cr_assert_not_null(p[i] = be->alloc(be, sizes[i], &e), "%s", e.msg);
        for (int i = 0; i < 4; i++)
            be->free(be, p[i]);
        be_cuda_memory_stats(be, &st);
        if (cycle == 0)
            first = st;
        cr_assert_eq(st.reserved, first.reserved, "cycle %d: reserved %zu, was %zu", cycle,
                     st.reserved, first.reserved);
        cr_assert_eq(st.n_device_mallocs, first.n_device_mallocs, "cycle %d", cycle);
        cr_assert_eq(st.allocated, 0);
    }
    cr_expect_eq(first.n_device_mallocs, 4);
    cr_expect_geq(st.n_cache_hits, 99 * 4);
    gpu_end(be);
}

Test(alloc, allocated_counts_blocks_in_use_and_empty_cache_returns_the_rest)
{
    const struct backend *be = gpu_begin();
    struct err e = {0};
    struct gpu_mem_stats st;
    void *a = be->alloc(be, 1000, &e), *b = be->alloc(be, 5 << 20, &e);
    cr_assert(a && b, "%s", e.msg);
    be_cuda_memory_stats(be, &st);
    cr_expect_eq(st.allocated, 1024 + (6 << 20));
    cr_expect_eq(st.reserved, 1024 + (6 << 20));
    be->free(be, b);
    be_cuda_memory_stats(be, &st);
    cr_expect_eq(st.allocated, 1024);
    cr_expect_eq(st.reserved, 1024 + (6 << 20), "a freed block stays cached");
    cr_assert_eq(be_cuda_empty_cache(be, &e), 0, "%s", e.msg);
    be_cuda_memory_stats(be, &st);
    cr_expect_eq(st.reserved, 1024, "empty_cache keeps only blocks in use");
    cr_expect_eq(st.peak_allocated, 1024 + (6 << 20));
    be->free(be, a);
    gpu_end(be);
}

Test(alloc, asking_for_a_petabyte_fails_with_out_of_memory_and_the_backend_still_works)
{
    const struct backend *be = gpu_begin();
    struct err e = {0};
    size_t pb = (size_t)1 << 50;
    cr_expect_null(be->alloc(be, pb, &e));
    cr_expect_eq(e.code, ERR_OUT_OF_MEMORY, "%s", e.msg);
    cr_expect(strstr(e.msg, "1125899906842624") != NULL, "names the bytes asked: %s", e.msg);
    cr_expect(strstr(e.msg, "free") != NULL, "names the bytes free: %s", e.msg);
    const int64_t shape[] = {1000};
    double v[1000];
    for (int i = 0; i < 1000; i++)
        v[i] = i;
    struct tensor *t = tensor_on(be, TENSOR_F64, 1, shape, v);
    double s;
    cr_assert_eq(be->k->sumsq(be, t, &s, &e), 0, "after the OOM: %s", e.msg);
    cr_expect_eq(s, 332833500.0);
    tensor_free(t);
    gpu_end(be);
}

/* A device copy of the data must not take the step's temporaries (the cache's free blocks). */
Test(alloc, a_spare_block_neither_reuses_nor_frees_the_cache_of_free_blocks)
{
    const struct backend *be = gpu_begin();
    struct err e = {0};
    struct gpu_mem_stats st;
    void *tmp = be->alloc(be, 5 << 20, &e);
    cr_assert_not_null(tmp, "%s", e.msg);
    be->free(be, tmp);   /* cached: a step's temporary, free until the next step */
    void *spare = be_cuda_alloc_spare(be, 5 << 20, &e);
    cr_assert_not_null(spare, "%s", e.msg);
    cr_expect_neq(spare, tmp, "the cached block was handed out as spare memory");
    cr_expect_null(be_cuda_alloc_spare(be, (size_t)1 << 50, &e));
    cr_expect_eq(e.code, ERR_OUT_OF_MEMORY, "%s", e.msg);
    be_cuda_memory_stats(be, &st);
    cr_expect_eq(st.reserved, (size_t)12 << 20, "the failed spare request emptied the cache");
    cr_expect_eq(st.allocated, (size_t)6 << 20);
    void *again = be->alloc(be, 5 << 20, &e);
    cr_expect_eq(again, tmp, "the temporary's block is still there for the next step");
    be->free(be, again);
    be->free(be, spare);
    gpu_end(be);
}

Test(alloc, memset_and_copies_round_trip_through_the_device)
{
    const struct backend *be = gpu_begin();
    struct err e = {0};
    double in[257], out[257];
    for (int i = 0; i < 257; i++)
        in[i] = 1.0 / (i + 1);
    char *p = be->alloc(be, sizeof in, &e);
    cr_assert_not_null(p, "%s", e.msg);
    cr_assert_eq(be->from_host(be, p, in, sizeof in, &e), 0, "%s", e.msg);
    cr_assert_eq(be->memset0(be, p + 8, 16, &e), 0, "%s", e.msg);
    cr_assert_eq(be->to_host(be, out, p, sizeof out, &e), 0, "%s", e.msg);
    for (int i = 0; i < 257; i++)
        cr_expect_eq(out[i], i == 1 || i == 2 ? 0.0 : in[i], "element %d", i);
    be->free(be, p);
    gpu_end(be);
}

Test(alloc, pinned_batches_upload_on_the_copy_stream_and_kernels_see_them)
{
    const struct backend *be = gpu_begin();
    struct err e = {0};
    struct gpu_host_allocator h = gpu_pinned_allocator();
    const int64_t n[] = {1 << 20};
    double *pinned = h.alloc(h.ctx, sizeof(double) << 20, &e);
    cr_assert_not_null(pinned, "%s", e.msg);
    for (int64_t i = 0; i < n[0]; i++)
        pinned[i] = 0.5;
    struct tensor *t = tensor_on(be, TENSOR_F64, 1, n, NULL);
    struct gpu_event *copied;
    cr_assert_eq(be_cuda_event_new(be, &copied, &e), 0, "%s", e.msg);
    cr_assert_eq(be_cuda_upload_async(be, t->data, pinned, sizeof(double) << 20, NULL, copied, &e),
                 0, "%s", e.msg);
    double s;
    cr_assert_eq(be->k->sumsq(be, t, &s, &e), 0, "%s", e.msg);   /* queued after the upload */
    cr_expect_eq(s, 0.25 * (double)n[0]);
    bool done = false;
    cr_assert_eq(be_cuda_event_query(copied, &done, &e), 0, "%s", e.msg);
    cr_expect(done, "the copy finished before the kernel that waited for it");
    be_cuda_event_free(copied);
    tensor_free(t);
    h.free(h.ctx, pinned);
    gpu_end(be);
}

Test(alloc, a_cuda_failure_names_the_file_and_line)
{
    const struct backend *be = gpu_begin();
    struct err e = {0};
    double x = 1;
    /* Address 0x10 is no device allocation: the copy fails when issued or at the wait for it. */
    int rc = be->from_host(be, (void *)(uintptr_t)0x10, &x, sizeof x, &e);
    cr_expect_neq(rc, 0);
    cr_expect_eq(e.code, ERR_DEVICE, "%s", e.msg);
    cr_expect(strstr(e.msg, "gpu/be_cuda.c:") != NULL, "%s", e.msg);
    cr_expect(strstr(e.msg, "cudaMemcpyAsync") != NULL ||
              strstr(e.msg, "cudaStreamSynchronize") != NULL, "%s", e.msg);
    gpu_end(be);
}

Test(alloc, creating_a_backend_for_a_missing_device_fails_cleanly)
{
    gpu_or_skip();
    struct backend *be = NULL;
    struct err e = {0};
    cr_expect_neq(be_cuda_create(4096, &be, &e), 0);
    cr_expect_null(be);
    cr_expect_eq(e.code, ERR_INVALID_ARG, "%s", e.msg);
    cr_expect(strstr(e.msg, "cuda:4096") != NULL, "%s", e.msg);
}

struct other_thread {
    const struct backend *be;
    struct tensor *t;
    double sumsq;
    int rc;
    struct err e;
};

static void *use_from_other_thread(void *arg)
{
    struct other_thread *o = arg;
    o->rc = o->be->k->fill(o->be, o->t, 2, &o->e);
    if (!o->rc)
        o->rc = o->be->k->sumsq(o->be, o->t, &o->sumsq, &o->e);
    return NULL;
}

/* A worker made the backend; the API thread may still run it (the device is made current). */
Test(alloc, a_backend_works_from_a_thread_other_than_its_creator)
{
    const struct backend *be = gpu_begin();
    const int64_t n[] = {1000};
    struct other_thread o = {.be = be, .t = tensor_on(be, TENSOR_F32, 1, n, NULL)};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, use_from_other_thread, &o), 0);
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_expect_eq(o.rc, 0, "%s", o.e.msg);
    cr_expect_eq(o.sumsq, 4000.0);
    tensor_free(o.t);
    gpu_end(be);
}

/* Double buffering: the copy into a buffer waits for the event after its last reader. */
Test(alloc, an_upload_after_a_recorded_compute_event_lands_before_later_kernels)
{
    const struct backend *be = gpu_begin();
    struct err e = {0};
    struct gpu_host_allocator h = gpu_pinned_allocator();
    const int64_t n[] = {4096};
    double *pinned = h.alloc(h.ctx, sizeof(double) * 4096, &e);
    cr_assert_not_null(pinned, "%s", e.msg);
    struct tensor *t = tensor_on(be, TENSOR_F64, 1, n, NULL);
    struct gpu_event *free_again, *copied;
    cr_assert_eq(be_cuda_event_new(be, &free_again, &e), 0, "%s", e.msg);
    cr_assert_eq(be_cuda_event_new(be, &copied, &e), 0, "%s", e.msg);
    for (int round = 1; round <= 3; round++) {
        for (int i = 0; i < 4096; i++)
            pinned[i] = round;
        cr_assert_eq(be_cuda_upload_async(be, t->data, pinned, sizeof(double) * 4096, free_again,
                                          copied, &e), 0, "%s", e.msg);
        double s;
        cr_assert_eq(be->k->sumsq(be, t, &s, &e), 0, "%s", e.msg);
        cr_expect_eq(s, 4096.0 * round * round, "round %d", round);
        cr_assert_eq(be_cuda_compute_record(be, free_again, &e), 0, "%s", e.msg);
        bool done = false;
        cr_assert_eq(be_cuda_event_query(copied, &done, &e), 0, "%s", e.msg);
        cr_expect(done);
    }
    be_cuda_event_free(free_again);
    be_cuda_event_free(copied);
    tensor_free(t);
    h.free(h.ctx, pinned);
    gpu_end(be);
}

/*
 * A buffer's first upload: the caller has recorded no reader yet, but tensor_new's zero-fill
 * is queued on the compute stream. A copy that ran ahead of it would be zeroed again (the
 * emulated device runs copies ahead of unordered compute work, so there it always is).
 */
Test(alloc, a_started_upload_into_a_new_tensor_lands_after_its_zero_fill)
{
    const struct backend *be = gpu_begin();
    struct err e = {0};
    struct gpu_host_allocator h = gpu_pinned_allocator();
    enum { N = 4096 };
    const int64_t n[] = {N};
    double *pinned = h.alloc(h.ctx, sizeof(double) * N, &e);
    cr_assert_not_null(pinned, "%s", e.msg);
    for (int i = 0; i < N; i++)
        pinned[i] = 3;
    struct tensor *t = tensor_on(be, TENSOR_F64, 1, n, NULL);   /* zero-filled, queued */
    struct gpu_event *read, *copied;
    cr_assert_eq(be_cuda_event_new(be, &read, &e), 0, "%s", e.msg);
    cr_assert_eq(be_cuda_event_new(be, &copied, &e), 0, "%s", e.msg);
    cr_assert_eq(be_cuda_upload_start(be, t->data, pinned, sizeof(double) * N, read, copied, &e),
                 0, "%s", e.msg);
    cr_assert_eq(be_cuda_compute_wait(be, copied, &e), 0, "%s", e.msg);
    double s;
    cr_assert_eq(be->k->sumsq(be, t, &s, &e), 0, "%s", e.msg);
    cr_expect_eq(s, 9.0 * N, "the upload was overwritten by the zero-fill queued before it");
    be_cuda_event_free(read);
    be_cuda_event_free(copied);
    tensor_free(t);
    h.free(h.ctx, pinned);
    gpu_end(be);
}

/* The host waits until everything before ev has finished (wdev.c's loop, without the sleep). */
static void wait_for(struct gpu_event *ev)
{
    struct err e = {0};
    for (bool done = false; !done;)
        cr_assert_eq(be_cuda_event_query(ev, &done, &e), 0, "%s", e.msg);
}

/*
 * The training loop's protocol (train/wdev.h): batch r+1 is copied into the other buffer
 * with be_cuda_upload_start while kernels read batch r, which are queued after the start and
 * do not wait for it; compute waits for the copy only through be_cuda_compute_wait. Round r's
 * buffer holds r everywhere, and every round adds it to acc READS times: a copy that overwrote
 * a buffer still being read, or a read before its copy landed, would change the total. The
 * reads of a round outlast a copy (2 MiB), so a copy that did not wait for the `read` event
 * would land while the round before still reads its buffer.
 */
Test(alloc, started_uploads_into_two_buffers_overlap_kernels_reading_the_other_and_lose_nothing)
{
    const struct backend *be = gpu_begin();
    struct err e = {0};
    enum { N = 1 << 18, ROUNDS = 12, READS = 64 };
    const int64_t n[] = {N};
    struct gpu_host_allocator h = gpu_pinned_allocator();
    double *src[2];
    struct tensor *buf[2];
    struct gpu_event *copied[2], *read[2];
    for (int i = 0; i < 2; i++) {
        cr_assert_not_null(src[i] = h.alloc(h.ctx, sizeof(double) * N, &e), "%s", e.msg);
        buf[i] = tensor_on(be, TENSOR_F64, 1, n, NULL);
        cr_assert_eq(be_cuda_event_new(be, &copied[i], &e), 0, "%s", e.msg);
        cr_assert_eq(be_cuda_event_new(be, &read[i], &e), 0, "%s", e.msg);
    }
    struct tensor *acc = tensor_on(be, TENSOR_F64, 1, n, NULL);
    cr_assert_eq(be->k->fill(be, acc, 0, &e), 0, "%s", e.msg);
    /* The first batch: nothing to overlap, started and waited for. */
    for (int j = 0; j < N; j++)
        src[0][j] = 1;
    cr_assert_eq(be_cuda_upload_start(be, buf[0]->data, src[0], sizeof(double) * N, read[0], copied[0], &e),
                 0, "%s", e.msg);
    wait_for(copied[0]);
    cr_assert_eq(be_cuda_compute_wait(be, copied[0], &e), 0, "%s", e.msg);
    for (int r = 1; r <= ROUNDS; r++) {
        int cur = (r - 1) % 2, next = r % 2;
        if (r < ROUNDS) {
            for (int j = 0; j < N; j++)   /* its last copy finished: the host waited for it */
                src[next][j] = r + 1;
            cr_assert_eq(be_cuda_upload_start(be, buf[next]->data, src[next], sizeof(double) * N,
                                              read[next], copied[next], &e), 0, "%s", e.msg);
        }
        for (int k = 0; k < READS; k++)   /* acc += buf[cur], queued after the start */
            cr_assert_eq(be->k->reduce(be, buf[cur], acc, 1, 1, 1, &e), 0, "%s", e.msg);
        cr_assert_eq(be_cuda_compute_record(be, read[cur], &e), 0, "%s", e.msg);
        if (r < ROUNDS) {
            wait_for(copied[next]);
            cr_assert_eq(be_cuda_compute_wait(be, copied[next], &e), 0, "%s", e.msg);
        }
    }
    double *got = values_of(acc);   /* waits for the compute stream */
    const double want = READS * ROUNDS * (ROUNDS + 1) / 2.0;
    int64_t bad = 0;
    for (int j = 0; j < N; j++)
        bad += got[j] != want;
    cr_expect_eq(bad, 0, "%lld of %d elements differ from %g (element 0: %g)", (long long)bad, N, want,
                 got[0]);
    free(got);
    tensor_free(acc);
    for (int i = 0; i < 2; i++) {
        be_cuda_event_free(copied[i]);
        be_cuda_event_free(read[i]);
        tensor_free(buf[i]);
        h.free(h.ctx, src[i]);
    }
    gpu_end(be);
}

Test(alloc, a_started_upload_without_a_copied_event_is_refused)
{
    const struct backend *be = gpu_begin();
    struct err e = {0};
    const int64_t n[] = {16};
    double host[16] = {0};
    struct tensor *t = tensor_on(be, TENSOR_F64, 1, n, NULL);
    cr_expect_neq(be_cuda_upload_start(be, t->data, host, sizeof host, NULL, NULL, &e), 0);
    cr_expect_eq(e.code, ERR_INTERNAL, "%s", e.msg);
    tensor_free(t);
    gpu_end(be);
}

/* A prefetch thread has no device of its own: the allocator makes its GPU current there. */
static void *pinned_from_a_new_thread(void *arg)
{
    const int *device = arg;
    struct gpu_host_allocator h = gpu_pinned_allocator_on(device);
    struct err e = {0};
    void *p = h.alloc(h.ctx, 4096, &e);
    h.free(h.ctx, p);
    return p;
}

Test(alloc, pinned_memory_for_a_gpu_is_allocated_from_a_thread_without_a_device)
{
    gpu_or_skip();
    int device = 0;
    pthread_t t;
    void *p = NULL;
    cr_assert_eq(pthread_create(&t, NULL, pinned_from_a_new_thread, &device), 0);
    cr_assert_eq(pthread_join(t, &p), 0);
    cr_expect_not_null(p, "no pinned memory for cuda:0 from a fresh thread");
}

Test(alloc, pinned_memory_for_a_missing_gpu_is_a_device_error)
{
    gpu_or_skip();
    int missing = 63;
    struct gpu_host_allocator h = gpu_pinned_allocator_on(&missing);
    struct err e = {0};
    cr_expect_null(h.alloc(h.ctx, 4096, &e));
    cr_expect_eq(e.code, ERR_DEVICE, "%s", e.msg);
    cr_expect(strstr(e.msg, "cudaSetDevice") != NULL, "%s", e.msg);
}

/* The reclaim hook of the test below: gives back its spare block once. */
struct holding {
    const struct backend *be;
    void *block;
    int calls;
};

static bool give_back(void *ctx)
{
    struct holding *h = ctx;
    h->calls++;
    if (!h->block)
        return false;
    h->be->free(h->be, h->block);
    h->block = NULL;
    return true;
}

/* The hook is the last resort: not asked while memory suffices or for a spare block, asked
 * once when a get would fail, and the get then succeeds with what it gave back. */
Test(alloc, out_of_memory_asks_the_reclaim_hook_once_and_then_succeeds)
{
    const struct backend *be = gpu_begin();
    struct err e = {0};
    size_t free0;
    cr_assert_eq(be_cuda_free_memory(be, &free0, &e), 0, "%s", e.msg);
    size_t big = gpu_alloc_round(free0 / 4);
    struct holding h = {.be = be, .block = be_cuda_alloc_spare(be, big, &e)};
    cr_assert_not_null(h.block, "%s", e.msg);
    be_cuda_set_reclaim(be, give_back, &h);
    void *small = be->alloc(be, 4096, &e);
    cr_assert_not_null(small, "%s", e.msg);
    cr_expect_eq(h.calls, 0, "memory sufficed");
    size_t free1;
    cr_assert_eq(be_cuda_free_memory(be, &free1, &e), 0, "%s", e.msg);
    cr_expect_null(be_cuda_alloc_spare(be, free1 + big / 2, &e), "spare memory takes nothing back");
    cr_expect_eq(e.code, ERR_OUT_OF_MEMORY, "%s", e.msg);
    cr_expect_eq(h.calls, 0, "a spare block never asks the hook");
    void *p = be->alloc(be, free1 + big / 2, &e);
    cr_expect_not_null(p, "%s", e.msg);
    cr_expect_eq(h.calls, 1);
    cr_expect_null(h.block, "the hook's block was given back");
    be->free(be, p);
    be->free(be, small);
    be_cuda_set_reclaim(be, NULL, NULL);
    gpu_end(be);
}
