/* test_philox.c — Philox4x32-10 against Random123's known answers (host), and the device stream against the host. */
#include "gpu_test.h"
#include "philox.h"

/* Random123 tests/kat_vectors, the three "philox4x32 10" lines: counter, key, result. */
static const uint32_t kat[3][10] = {
    {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
    {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
     0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
    {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
     0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1},
};

Test(philox, host_code_reproduces_random123_known_answers)
{
    for (int i = 0; i < 3; i++) {
        struct philox4x32 c = {{kat[i][0], kat[i][1], kat[i][2], kat[i][3]}};
        struct philox4x32 r = philox4x32_10(c, kat[i][4], kat[i][5]);
        for (int j = 0; j < 4; j++)
            cr_expect_eq(r.v[j], kat[i][6 + j], "vector %d word %d: %08x, want %08x", i, j,
                         r.v[j], kat[i][6 + j]);
    }
}

Test(philox, uniforms_lie_in_range_and_spread)
{
    double lo = 1, hi = 0;
    for (uint64_t i = 0; i < 10000; i++) {
        double u = philox_uniform_f64(42, i, -2, 3);
        float f = philox_uniform_f32(42, i, -2, 3);
        cr_assert(u >= -2 && u < 3 && f >= -2 && f <= 3, "element %llu: %g %g",
                  (unsigned long long)i, u, (double)f);
        lo = u < lo ? u : lo;
        hi = u > hi ? u : hi;
    }
    cr_expect_lt(lo, -1.99);
    cr_expect_gt(hi, 2.99);
    cr_expect_neq(philox_uniform_f64(1, 0, 0, 1), philox_uniform_f64(2, 0, 0, 1));
}

Test(philox, device_init_equals_the_host_stream_bit_for_bit)
{
    const struct backend *be = gpu_begin();
    struct err e = {0};
    const int64_t n[] = {100003};
    for (int d = 0; d < 2; d++) {
        enum tensor_dtype dt = d ? TENSOR_F32 : TENSOR_F64;
        struct tensor *t = tensor_on(be, dt, 1, n, NULL);
        cr_assert_eq(be_cuda_uniform(be, t, 7, 1000, -0.5, 0.5, &e), 0, "%s", e.msg);
        double *got = values_of(t);
        for (int64_t i = 0; i < n[0]; i++) {
            double want = dt == TENSOR_F64
                              ? philox_uniform_f64(7, 1000 + (uint64_t)i, -0.5, 0.5)
                              : (double)philox_uniform_f32(7, 1000 + (uint64_t)i, -0.5f, 0.5f);
            cr_assert_eq(got[i], want, "%s element %lld", tensor_dtype_name(dt), (long long)i);
        }
        free(got);
        tensor_free(t);
    }
    gpu_end(be);
}
