/* test_wdev_cpu.c — a worker's device (train/wdev.h) over the CPU backend: the upload protocol through core's table alone, with no GPU. */
#include <criterion/criterion.h>
#include <string.h>

#include "backend.h"
#include "wdev.h"
#include "wdev_protocol.h"

/* The protocol's tests (wdev_protocol.h) on the CPU backend: nothing copied, every batch read
 * where it lies. */
static struct fixture open_or_skip(void)
{
    struct fixture f = fixture_open(be_cpu_factory());
    cr_assert_eq(f.be, be_cpu());
    return f;
}

Test(wdev, without_a_factory_a_gpu_worker_has_no_device)
{
    struct wdev *d = (struct wdev *)1;
    struct err e = {0};
    cr_expect_eq(wdev_open(NULL, 2, &d, &e), ERR_DEVICE);
    cr_expect_null(d);
    cr_expect_str_eq(e.msg, "cuda:2: this traind was built without CUDA");
}

/* Host memory holds the data already: there is no device cache to keep a second copy in. */
Test(wdev, there_is_no_cache_in_host_memory)
{
    struct fixture f = open_or_skip();
    struct err e = {0};
    struct wdev_cache *c = (struct wdev_cache *)1;
    cr_assert_eq(wdev_cache_new(f.d, &c, &e), 0, "%s", e.msg);
    cr_expect_null(c);
    close_fixture(&f);
}

/* The look-ahead runs on the CPU as on a GPU, with nothing copied: each batch is its slot. */
Test(wdev, on_host_memory_a_batch_is_read_in_its_slot)
{
    struct fixture f = open_or_skip();
    struct err e = {0};
    void *a, *b, *ev;
    cr_expect(wdev_upload_in_place(f.u));
    cr_assert_eq(wdev_upload_start(f.u, f.slot[0], BYTES, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_finish(f.u, &a, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_start(f.u, f.slot[1], BYTES, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_step_done(f.u, a, &e), 0, "%s", e.msg);
    cr_assert_eq(wdev_upload_finish(f.u, &b, &e), 0, "%s", e.msg);
    cr_expect_eq(a, (void *)f.slot[0]);
    cr_expect_eq(b, (void *)f.slot[1]);
    cr_assert_eq(wdev_upload(f.u, f.slot[0], BYTES, &ev, &e), 0, "%s", e.msg);
    cr_expect_eq(ev, (void *)f.slot[0]);
    close_fixture(&f);
}

Test(wdev, the_cpu_factory_makes_only_cpu_0)
{
    struct wdev *d = (struct wdev *)1;
    struct err e = {0};
    cr_expect_eq(wdev_open(be_cpu_factory(), 1, &d, &e), ERR_DEVICE);
    cr_expect_null(d);
    cr_expect_str_eq(e.msg, "cpu:1: the CPU backend is one device, cpu:0");
}

Test(wdev, job_end_and_memory_on_the_cpu_are_trivial)
{
    struct fixture f = open_or_skip();
    struct err e = {0};
    cr_expect_eq(wdev_job_end(f.d, &e), 0, "%s", e.msg);
    uint64_t allocated = 1, reserved = 1;
    wdev_memory(f.d, &allocated, &reserved);
    cr_expect_eq(allocated, 0);
    cr_expect_eq(reserved, 0);
    close_fixture(&f);
}
