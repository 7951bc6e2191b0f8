/* test_cublas_load.c — cuBLAS is opened on demand (gpu/cublas_load.c); needs the toolkit, not a GPU. */
#include <criterion/criterion.h>
#include <string.h>

#include "cublas_fn.h"
#include "device.h"

Test(cublas_load, nothing_loads_cublas_until_a_backend_asks)
{
    cr_expect_eq(gpu_cublas_version(), 0, "cuBLAS is in the process before anyone loaded it");
}

Test(cublas_load, loading_fills_every_entry_and_reports_the_version)
{
    struct gpu_cublas t;
    struct err e = {0};
    cr_assert_eq(gpu_cublas_load(&t, &e), 0, "%s", e.msg);
    void *entries[sizeof t / sizeof(void *)];
    memcpy(entries, &t, sizeof t);
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
        cr_expect_not_null(entries[i], "entry %zu of struct gpu_cublas is not filled", i);
    cr_expect_eq(gpu_cublas_version() / 1000, CUBLAS_VER_MAJOR);
}

Test(cublas_load, a_missing_library_is_a_device_error_that_names_it)
{
    struct gpu_cublas t;
    struct err e = {0};
    cr_assert_neq(gpu_cublas_load_from("libcublas.so.999", &t, &e), 0);
    cr_expect_eq(e.code, ERR_DEVICE);
    cr_expect(strstr(e.msg, "libcublas.so.999") != NULL, "%s", e.msg);
    cr_expect(strstr(e.msg, "LD_LIBRARY_PATH") != NULL, "%s", e.msg);
    cr_expect_null(t.dgemm);
}
