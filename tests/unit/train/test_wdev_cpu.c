/* test_wdev_cpu.c — a worker's device (train/wdev.h) over the CPU backend: the upload protocol through core's table alone, with no GPU. */
#include <criterion/criterion.h>
#include <string.h>

#include "backend.h"
#include "wdev.h"
#include "wdev_protocol.h"

static int cpu_create(int index, const struct backend **out, struct err *e)
{
    *out = be_cpu();
    return 0;
}

static void cpu_destroy(const struct backend *be) {}

static const struct backend_factory cpu_factory = {
    .kind = "cpu", .create = cpu_create, .destroy = cpu_destroy,
};

/* The protocol's tests (wdev_protocol.h) on the CPU backend: two buffers still, every copy
 * done on return. */
static struct fixture open_or_skip(void)
{
    struct fixture f = fixture_open(&cpu_factory);
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

/* Host memory holds the data already: the device cache keeps no second copy, and says so. */
Test(wdev, the_cache_keeps_nothing_in_host_memory)
{
    struct fixture f = open_or_skip();
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
