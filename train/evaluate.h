/* evaluate.h — a job's loss over its whole data.test, batch by batch and without a tape. */
#ifndef TRAIND_TRAIN_EVALUATE_H
#define TRAIND_TRAIN_EVALUATE_H

#include <stdbool.h>
#include <stddef.h>

#include "backend.h"
#include "dataset.h"
#include "err.h"
#include "nn.h"

struct wdev_upload;
struct evaluate;

/*
 * Opens the test set of cfg (the training set's settings with the test URL; shuffling and
 * drop_last are switched off here, so every row counts once, in file order). Its rows must
 * have features feature columns, as the training set's do (ERR_INVALID_DATA otherwise). A
 * replica's (cfg->share_n > 1) reads and evaluates its share of each batch only.
 */
int evaluate_open(const struct dataset_config *cfg, size_t features, struct evaluate **out,
                  struct err *e);
void evaluate_close(struct evaluate *ev);   /* NULL is fine */

/* Where the model lives: its backend and dtype, and on a GPU the buffer batches are copied into. */
struct evaluate_target {
    const struct backend *be;
    enum tensor_dtype dt;
    struct wdev_upload *upload;   /* NULL on the CPU */
    /* Called before each batch (a worker's heartbeat); false ends the pass with ERR_CANCELLED. May be NULL. */
    bool (*go_on)(void *ctx);
    void *ctx;
    /*
     * A replica's (its test set opened with dataset_config.share_n > 1, so each batch holds
     * its share's rows only): called once at the pass's end with ctx, it sums the replicas'
     * {loss sum, rows} in place, so that every replica gets the whole set's mean.
     */
    int (*reduce)(void *ctx, double *sums, size_t n, struct err *e);
};

/*
 * The mean of the loss over every row of the test set, as PyTorch's reduction='mean' over
 * the whole set: each batch's mean weighted by its rows. Reads one epoch from its start; the
 * partitions stay in memory after the first pass when they fit. Bad test data fails with the
 * file, line and column, prefixed "data.test". A replica evaluates its share's rows and
 * tg->reduce makes the mean the whole set's; a failure before reduce is the caller's to tell
 * the other replicas (they wait in theirs).
 */
int evaluate_loss(struct evaluate *ev, const struct evaluate_target *tg, struct nn_model *m,
                  enum nn_loss_kind kind, double *out, struct err *e);

#endif
