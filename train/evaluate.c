/* evaluate.c — the loss over a whole test set: one epoch in file order, forward without a tape, row-weighted mean. */
#include "evaluate.h"

#include <stdlib.h>

#include "tensor.h"
#include "wdev.h"

struct evaluate {
    struct dataset *ds;
    void *batch;        /* one batch of rows on the host; a replica's: its share of one */
    size_t features;
    int share_rank, share_n; /* a replica's reader (share_n > 1, dataset_config); else 0 */
};

int evaluate_open(const struct dataset_config *cfg, size_t features, struct evaluate **out,
                  struct err *e)
{
    *out = NULL;
    struct dataset_config dc = *cfg;
    dc.shards_url = NULL;           /* the train set's shards say nothing of the test set */
    dc.drop_last = false;
    dc.shuffle_partitions = false;
    dc.shuffle_buffer = 0;
    struct evaluate *ev = calloc(1, sizeof *ev);
    if (!ev)
        return err_set(e, ERR_NOMEM, "data.test: out of memory");
    if (dataset_open(&dc, &ev->ds, e)) {
        evaluate_close(ev);
        return err_prefix(e, "data.test");
    }
    ev->features = features;
    if (cfg->share_n > 1) {
        ev->share_rank = cfg->share_rank;
        ev->share_n = cfg->share_n;
    }
    if (dataset_num_features(ev->ds) != features) {
        err_set(e, ERR_INVALID_DATA, "data.test %s has %zu feature columns, data.train %zu",
                cfg->url, dataset_num_features(ev->ds), features);
        evaluate_close(ev);
        return e->code;
    }
    /* Pages are touched only as far as the largest batch fills them: a small test set costs little. */
    if (!(ev->batch = malloc(dataset_batch_bytes(ev->ds)))) {
        evaluate_close(ev);
        return err_set(e, ERR_NOMEM, "data.test: out of memory for a batch");
    }
    *out = ev;
    return 0;
}

void evaluate_close(struct evaluate *ev)
{
    if (!ev)
        return;
    dataset_close(ev->ds);
    free(ev->batch);
    free(ev);
}

/* The mean loss of one batch of rows (label first) at data, a buffer on tg->be. */
static int batch_loss(const struct evaluate_target *tg, struct nn_model *m, enum nn_loss_kind kind,
                      void *data, size_t rows, size_t features, double *out, struct err *e)
{
    int64_t shape[2] = {(int64_t)rows, (int64_t)(1 + features)};
    struct tensor *batch = NULL, *x = NULL, *y = NULL, *loss = NULL;
    int rc = 0;
    /* The training step's views and loss call, with no tape: nothing is recorded, results are ours. */
    if (!(batch = tensor_wrap(tg->be, data, tg->dt, 2, shape, NULL, e)) ||
        !(x = tensor_slice(batch, 1, 1, shape[1], e)) || !(y = tensor_select(batch, 1, 0, e)) ||
        !(loss = nn_forward_loss(m, NULL, kind, x, y, e)) || tensor_item(loss, out, e))
        rc = e->code ? e->code : err_set(e, ERR_INTERNAL, "evaluating a batch failed");
    tensor_free(loss);
    tensor_free(y);
    tensor_free(x);
    tensor_free(batch);
    return rc;
}

int evaluate_loss(struct evaluate *ev, const struct evaluate_target *tg, struct nn_model *m,
                  enum nn_loss_kind kind, double *out, struct err *e)
{
    struct dataset_cursor c;
    dataset_tell(ev->ds, &c);
    if (c.batch != 0) {   /* an earlier pass stopped half-way: start this one afresh */
        c = (struct dataset_cursor){.epoch = c.epoch + 1, .batch = 0};
        if (dataset_seek(ev->ds, &c, e))
            return err_prefix(e, "data.test");
    }
    size_t row_bytes = (1 + ev->features) * (tg->dt == TENSOR_F32 ? sizeof(float) : sizeof(double));
    double sums[2] = {0, 0};   /* the loss summed over rows, and the rows: a replica's, then all */
    for (struct dataset_cursor at = c; at.epoch == c.epoch; dataset_tell(ev->ds, &at)) {
        if (tg->go_on && !tg->go_on(tg->ctx))
            return err_set(e, ERR_CANCELLED, "evaluation on data.test stopped");
        size_t rows = 0, lo = 0, count;
        if (dataset_next_batch(ev->ds, ev->batch, &rows, NULL, e))
            return err_prefix(e, "data.test");
        count = rows;
        if (ev->share_n > 1)   /* the dataset wrote the share's rows from the buffer's start */
            dataset_share(rows, ev->share_rank, ev->share_n, &lo, &count);
        if (count == 0)
            continue;
        void *data = ev->batch;
        double loss;
        if ((tg->upload && wdev_upload(tg->upload, data, count * row_bytes, &data, e)) ||
            batch_loss(tg, m, kind, data, count, ev->features, &loss, e))
            return err_prefix(e, "evaluating on data.test");
        sums[0] += loss * (double)count;
        sums[1] += (double)count;
    }
    if (ev->share_n > 1 && tg->reduce && tg->reduce(tg->ctx, sums, 2, e))
        return e->code;
    if (sums[1] == 0)
        return err_set(e, ERR_INVALID_DATA, "data.test has no rows");
    *out = sums[0] / sums[1];
    return 0;
}
