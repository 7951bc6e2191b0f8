/* rng.c — MT19937 and PyTorch's uniform transforms. */
#include "rng.h"

#include <math.h>

enum { MT_N = 624, MT_M = 397 };

void rng_seed(struct rng *r, uint64_t seed)
{
    r->mt[0] = (uint32_t)seed;
    for (int i = 1; i < MT_N; i++)
        r->mt[i] = 1812433253u * (r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) + (uint32_t)i;
    r->next = MT_N;
}

static void mt_refill(struct rng *r)
{
    for (int i = 0; i < MT_N; i++) {
        uint32_t y = (r->mt[i] & 0x80000000u) | (r->mt[(i + 1) % MT_N] & 0x7fffffffu);
        r->mt[i] = r->mt[(i + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    r->next = 0;
}

uint32_t rng_next_u32(struct rng *r)
{
    if (r->next >= MT_N)
        mt_refill(r);
    uint32_t y = r->mt[r->next++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
}

uint64_t rng_next_u64(struct rng *r)
{
    uint64_t hi = rng_next_u32(r);
    return hi << 32 | rng_next_u32(r);
}

double rng_uniform_f64(struct rng *r, double from, double to)
{
    double x = (double)(rng_next_u64(r) & ((1ull << 53) - 1)) * 0x1.0p-53;
    return fma(x, to - from, from);
}

float rng_uniform_f32(struct rng *r, float from, float to)
{
    float x = (float)(rng_next_u32(r) & ((1u << 24) - 1)) * 0x1.0p-24f;
    return fmaf(x, to - from, from);
}

double rng_uniform(struct rng *r)
{
    return rng_uniform_f64(r, 0.0, 1.0);
}
