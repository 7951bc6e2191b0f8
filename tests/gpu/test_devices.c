/* test_devices.c — GPU discovery: on a GPU machine every device reports sane properties. */
#include <criterion/criterion.h>

#include "device.h"

static int gpus_or_skip(void)
{
    char why[256] = "";
    int n = 0;
    cr_assert_eq(gpu_device_count(&n, why, sizeof why), 0);
    if (n == 0)
        cr_skip_test("no GPU on this machine (%s): the GPU suite runs on a CUDA device only", why);
    return n;
}

Test(gpu_devices, every_device_reports_name_capability_sms_and_memory)
{
    int n = gpus_or_skip();
    for (int i = 0; i < n; i++) {
        struct gpu_device_info d;
        struct err e = {0};
        cr_assert_eq(gpu_device_query(i, &d, &e), 0, "cuda:%d: %s", i, e.msg);
        cr_expect_neq(d.name[0], '\0');
        cr_expect_geq(d.cc_major, 5);
        cr_expect_gt(d.sm_count, 0);
        cr_expect_gt(d.mem_total, (size_t)1 << 30);
        cr_expect_leq(d.mem_free, d.mem_total);
        cr_expect_eq(strlen(d.pci_bus_id), 12, "PCI id %s", d.pci_bus_id);
    }
}

Test(gpu_devices, querying_a_device_that_does_not_exist_fails_cleanly)
{
    int n = gpus_or_skip();
    struct gpu_device_info d;
    struct err e = {0};
    cr_assert_neq(gpu_device_query(n, &d, &e), 0);
    cr_expect_eq(e.code, ERR_DEVICE);
    cr_expect(strstr(e.msg, "cuda:") != NULL, "%s", e.msg);
}

Test(gpu_devices, versions_are_reported_when_a_driver_is_present)
{
    gpus_or_skip();
    int driver = 0, runtime = 0;
    gpu_versions(&driver, &runtime);
    cr_expect_geq(driver, 12000);
    cr_expect_geq(runtime, 12000);
}

Test(gpu_devices, describing_a_device_fills_all_but_its_free_memory)
{
    gpus_or_skip();
    struct gpu_device_info d, q;
    struct err e = {0};
    cr_assert_eq(gpu_device_describe(0, &d, &e), 0, "%s", e.msg);
    cr_assert_eq(gpu_device_query(0, &q, &e), 0, "%s", e.msg);
    cr_expect_str_eq(d.name, q.name);
    cr_expect_eq(d.mem_total, q.mem_total);
    cr_expect_str_eq(d.pci_bus_id, q.pci_bus_id);
    cr_expect_eq(d.mem_free, 0, "describe asked for free memory (that makes a context)");
    cr_expect_gt(q.mem_free, 0);
}
