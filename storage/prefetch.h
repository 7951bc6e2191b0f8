/* prefetch.h — a thread that fills a ring of batch slots from a dataset ahead of the consumer (the trainer). */
#ifndef TRAIND_STORAGE_PREFETCH_H
#define TRAIND_STORAGE_PREFETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataset.h"
#include "err.h"

/*
 * Where slot memory comes from. The daemon passes pinned memory (cudaHostAlloc)
 * when the CUDA backend is present, so the worker's cudaMemcpyAsync from a slot
 * runs as DMA; storage itself never knows about CUDA. Each slot is allocated once,
 * at prefetch_start, and freed at prefetch_stop, from the thread that calls them.
 */
struct prefetch_allocator {
    void *(*alloc)(void *ctx, size_t bytes); /* NULL when out of memory */
    void (*free)(void *ctx, void *p);
    void *ctx;
};

struct prefetch_config {
    size_t slots;                               /* batches in the ring; 0 = 2 (one in use, one being filled) */
    const struct prefetch_allocator *allocator; /* NULL = host memory, huge pages when large */
    bool views;                                 /* a batch may be a view of the dataset's rows
                                                   (dataset_next_view) instead of a copy in its slot:
                                                   for a consumer that reads host memory where it
                                                   lies and never writes it (the CPU trainer), not
                                                   one that copies to a device from pinned slots */
};

/* One batch handed to the consumer: rows x (1 + features) in the dataset's dtype, label first (a replica's
   dataset: its share's rows of the batch only, dataset_config.share_n; rows is still the batch's). */
struct prefetch_slot {
    void *data;                   /* NULL when prefetch_next timed out; with views, maybe the dataset's
                                     own rows: read only */
    size_t rows;
    struct dataset_cursor cursor; /* of this batch */
    struct dataset_cursor next;   /* of the batch after it: what a checkpoint taken after this step stores */
    size_t index;                 /* which slot, for prefetch_release */
};

struct prefetch_stats {
    uint64_t bytes, rows, batches;  /* delivered to the consumer */
    size_t slots;
    size_t ready;                   /* filled, waiting for the consumer (ring occupancy) */
    size_t held;                    /* handed out, not yet released */
    double wait_seconds;            /* the consumer's total wait on an empty ring (data_wait_seconds) */
    double producer_wait_seconds;   /* the producer's total wait on a full ring */
};

struct prefetch;

/*
 * prefetch_next, prefetch_release and prefetch_stats may be called from any
 * thread (a GPU worker may release from the thread that sees a copy's event);
 * prefetch_stop only when no other call on pf is in progress or will follow.
 *
 * Starts the thread. The dataset is the prefetcher's until prefetch_stop: seek it
 * before (resume), and call nothing else on it meanwhile. The thread blocks
 * SIGTERM and SIGINT so they reach the daemon's loop thread.
 */
int prefetch_start(struct dataset *ds, const struct prefetch_config *cfg, struct prefetch **out, struct err *e);

/*
 * The next batch in dataset_next_batch order. Blocks up to timeout_s seconds
 * (< 0: without limit). Returns ERR_OK with slot->data set, ERR_OK with
 * slot->data NULL when the time ran out first, or the producer's error (code and
 * message as the dataset gave them) once every batch filled before it has been
 * taken; the error stays, later calls return it again.
 */
int prefetch_next(struct prefetch *pf, double timeout_s, struct prefetch_slot *slot, struct err *e);

/* Gives a slot back for refilling (any order). Until then the producer never writes it. */
void prefetch_release(struct prefetch *pf, const struct prefetch_slot *slot);

void prefetch_stats(struct prefetch *pf, struct prefetch_stats *s);

/*
 * Stops the thread (promptly when it is waiting for a free slot; after the batch
 * in progress otherwise), joins it and frees the slots: the consumer must be done
 * with every slot, its device copies included. pf may be NULL.
 */
void prefetch_stop(struct prefetch *pf);

#endif
