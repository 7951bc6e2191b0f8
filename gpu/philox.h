/* philox.h — Philox4x32-10 (Salmon et al., SC'11, Random123), the same code on host and device. */
#ifndef TRAIND_GPU_PHILOX_H
#define TRAIND_GPU_PHILOX_H

#include <math.h>
#include <stdint.h>

/*
 * A counter-based generator: the output is a pure function of (counter, key), so
 * element i of a device-side init is the same whatever grid runs it, and the host
 * copy below is the oracle for the device kernel. Checked against Random123's
 * tests/kat_vectors (tests/gpu/test_philox.c).
 */
#ifdef __CUDACC__
#define PHILOX_HD __host__ __device__ __forceinline__
#else
#define PHILOX_HD static inline
#endif

struct philox4x32 {
    uint32_t v[4];
};

PHILOX_HD uint32_t philox_mulhilo(uint32_t a, uint32_t b, uint32_t *hi)
{
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

PHILOX_HD struct philox4x32 philox4x32_10(struct philox4x32 ctr, uint32_t k0, uint32_t k1)
{
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = philox_mulhilo(0xD2511F53u, ctr.v[0], &hi0);
        uint32_t lo1 = philox_mulhilo(0xCD9E8D57u, ctr.v[2], &hi1);
        struct philox4x32 n = {{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
        ctr = n;
        k0 += 0x9E3779B9u;   /* the Weyl key schedule, bumped after every round */
        k1 += 0xBB67AE85u;
    }
    return ctr;
}

/* The words of element idx of stream (seed): counter (idx, 0), key seed. */
PHILOX_HD struct philox4x32 philox_element(uint64_t seed, uint64_t idx)
{
    struct philox4x32 c = {{(uint32_t)idx, (uint32_t)(idx >> 32), 0u, 0u}};
    return philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32));
}

/* Uniform in [lo, hi) from 53 bits (words 0 and 1), as core's rng_uniform_f64: fma(x, hi-lo, lo). */
PHILOX_HD double philox_uniform_f64(uint64_t seed, uint64_t idx, double lo, double hi)
{
    struct philox4x32 w = philox_element(seed, idx);
    uint64_t bits = ((uint64_t)w.v[0] << 32 | w.v[1]) & ((1ull << 53) - 1);
    return fma((double)bits * 0x1.0p-53, hi - lo, lo);
}

/* Uniform in [lo, hi) from 24 bits of word 0, in float as rng_uniform_f32. */
PHILOX_HD float philox_uniform_f32(uint64_t seed, uint64_t idx, float lo, float hi)
{
    struct philox4x32 w = philox_element(seed, idx);
    return fmaf((float)(w.v[0] & ((1u << 24) - 1)) * 0x1.0p-24f, hi - lo, lo);
}

#endif
