/* shuffle.c — splitmix64 streams keyed by (seed, epoch, purpose) and Fisher-Yates permutations. */
#include "shuffle.h"

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void shuffle_rng_init(struct shuffle_rng *r, uint64_t seed, uint64_t epoch, uint64_t purpose)
{
    /* Hash each part in turn so nearby seeds and epochs give unrelated streams. */
    r->s = mix64(mix64(mix64(seed + 0x9E3779B97F4A7C15ull) ^ epoch) + purpose);
}

uint64_t shuffle_rng_next(struct shuffle_rng *r)
{
    return mix64(r->s += 0x9E3779B97F4A7C15ull);
}

uint64_t shuffle_rng_below(struct shuffle_rng *r, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)shuffle_rng_next(r) * n) >> 64);
}

void shuffle_permutation(size_t *perm, size_t n, uint64_t seed, uint64_t epoch)
{
    struct shuffle_rng r;
    shuffle_rng_init(&r, seed, epoch, SHUFFLE_PARTITIONS);
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)shuffle_rng_below(&r, i);
        size_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}
