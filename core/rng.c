/* rng.c — counter-based RNG: value i of a stream is splitmix64's finaliser of key + i * golden. */
#include "rng.h"

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void rng_seed(struct rng *r, uint64_t seed)
{
    /* Mixing the seed keeps streams of nearby seeds (0, 1, 2) unrelated. */
    r->key = mix64(seed + 0x9e3779b97f4a7c15ULL);
    r->counter = 0;
}

uint64_t rng_next_u64(struct rng *r)
{
    r->counter++;
    return mix64(r->key + r->counter * 0x9e3779b97f4a7c15ULL);
}

double rng_uniform(struct rng *r)
{
    return (double)(rng_next_u64(r) >> 11) * 0x1.0p-53;
}
