/* shuffle.h — the seeded randomness of datasets: a small generator keyed by (seed, epoch), permutations. */
#ifndef TRAIND_STORAGE_SHUFFLE_H
#define TRAIND_STORAGE_SHUFFLE_H

#include <stddef.h>
#include <stdint.h>

/* splitmix64: tiny state, so a stream is cheap to derive from (seed, epoch, purpose) and to copy. */
struct shuffle_rng {
    uint64_t s;
};

/* Purposes, so the partition order and the row buffer of one epoch draw from unrelated streams. */
enum { SHUFFLE_PARTITIONS = 1, SHUFFLE_ROWS = 2 };

void shuffle_rng_init(struct shuffle_rng *r, uint64_t seed, uint64_t epoch, uint64_t purpose);
uint64_t shuffle_rng_next(struct shuffle_rng *r);
/* Uniform in [0, n), n > 0 (Lemire's multiply-shift; the tiny bias of 2^-64 does not matter here). */
uint64_t shuffle_rng_below(struct shuffle_rng *r, uint64_t n);

/* perm[0..n) = a uniformly random permutation of 0..n-1 determined by (seed, epoch) (Fisher-Yates). */
void shuffle_permutation(size_t *perm, size_t n, uint64_t seed, uint64_t epoch);

#endif
