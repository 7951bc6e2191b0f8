/* rng.h — PyTorch's CPU generator (MT19937), so a job's seed means what torch.manual_seed means. */
#ifndef TRAIND_CORE_RNG_H
#define TRAIND_CORE_RNG_H

#include <stdint.h>

/*
 * The same stream as torch.manual_seed(seed) on the CPU: MT19937 seeded with the
 * low 32 bits of seed; a 64-bit draw is two 32-bit words, the first one high.
 * With the transforms below, initialising parameters in PyTorch's order gives
 * PyTorch's initial parameters bit for bit (tests/fixtures/core_rng_torch.txt).
 */
struct rng {
    uint32_t mt[624];
    int next;           /* index of the next word of mt to temper; 624 = refill first */
};

void rng_seed(struct rng *r, uint64_t seed);
uint32_t rng_next_u32(struct rng *r);
uint64_t rng_next_u64(struct rng *r);

/* Tensor.uniform_(from, to): float64 from 53 bits of a 64-bit draw, float32 from
 * 24 bits of a 32-bit draw, each as fma(x, to - from, from) in its own precision. */
double rng_uniform_f64(struct rng *r, double from, double to);
float rng_uniform_f32(struct rng *r, float from, float to);

/* Uniform in [0, 1) with 53 random bits. */
double rng_uniform(struct rng *r);

#endif
