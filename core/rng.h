/* rng.h — a small seeded counter-based RNG, the same stream on every machine. */
#ifndef TRAIND_CORE_RNG_H
#define TRAIND_CORE_RNG_H

#include <stdint.h>

struct rng {
    uint64_t key;
    uint64_t counter;
};

void rng_seed(struct rng *r, uint64_t seed);
uint64_t rng_next_u64(struct rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double rng_uniform(struct rng *r);

#endif
