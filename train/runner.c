/* runner.c — PyTorch's training loop for one job (train_run), on the CPU or a GPU worker's backend. */
#include "runner_impl.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "autograd.h"
#include "backend.h"
#include "dataset.h"
#include "evaluate.h"
#include "nn.h"
#include "http.h"
#include "init_from.h"
#include "log.h"
#include "optim.h"
#include "prefetch.h"
#include "replica.h"
#include "rng.h"
#include "snapshot.h"
#include "store.h"
#include "tensor.h"
#include "wdev.h"

/* Seconds on clock id: CLOCK_MONOTONIC for durations, CLOCK_REALTIME for a row's time. */
static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double runner_mono_now(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

int64_t train_now_ms(void)
{
    return (int64_t)(runner_mono_now() * 1000.0);
}

static void beat(const struct train_task *t)
{
    if (t->hooks->heartbeat)
        atomic_store(t->hooks->heartbeat, train_now_ms());
}

/* Whether this run speaks for the job: the only run, or a world's rank 0 (replica.h). */
static bool primary(const struct train_task *t)
{
    return !t->plan->world || t->plan->rank == 0;
}

enum train_stop runner_stop_asked(const struct train_task *t)
{
    if (!primary(t))   /* rank 0 stops the world, and the others see it in their next reduce, or here
                          while they wait for data */
        return train_world_ended(t->plan->world) ? TRAIN_STOP_CANCEL : TRAIN_RUN;
    return t->hooks->stop ? (enum train_stop)atomic_load(t->hooks->stop) : TRAIN_RUN;
}

static void run_free(struct run *r)
{
    if (r->first.data)
        prefetch_release(r->pf, &r->first);
    wdev_upload_abandon(r->upload);   /* a copy may still read the slot ahead */
    wdev_cache_free(r->cache);
    if (r->ahead.data)
        prefetch_release(r->pf, &r->ahead);
    prefetch_stop(r->pf);       /* before the dataset it reads */
    wdev_upload_free(r->upload);
    wdev_close(r->own_dev);
    ag_tape_free(r->tape);
    optim_free(r->opt);
    nn_model_free(r->model);
    dataset_close(r->ds);
    evaluate_close(r->eval);
}

/*
 * The network's outputs when the spec leaves them to the data: one for mse and bce,
 * one per class for cross_entropy, the classes being 0 .. the largest label of the
 * first batch (a later, larger label fails the job and names it; set model.outputs).
 */
static int outputs_from_data(struct run *r, int64_t *n_out, struct err *e)
{
    *n_out = 1;
    if (r->cs.loss != NN_LOSS_CROSS_ENTROPY)
        return 0;
    const struct prefetch_slot *b = &r->first;
    size_t cols = 1 + r->features;
    double top = 0;
    for (size_t i = 0; i < b->rows; i++) {
        double v = r->dt == TENSOR_F64 ? ((const double *)b->data)[i * cols]
                                       : (double)((const float *)b->data)[i * cols];
        if (!(v >= 0 && v <= SPEC_MAX_WIDTH - 1 && v == floor(v)))
            return err_set(e, ERR_INVALID_DATA, "label %g at row %zu of the first batch is not a class "
                           "index (0, 1, 2, ...)", v, i + 1);
        top = fmax(top, v);
    }
    *n_out = (int64_t)top + 1;
    return 0;
}

/* The spec's model on r->be, initialised from the job's seed as PyTorch would be (on the host, then copied). */
static int build_model(struct run *r, const struct job_spec *s, int64_t known_outputs, struct err *e)
{
    int64_t n_out = known_outputs ? known_outputs : s->net.outputs;
    if (s->model == SPEC_MODEL_MLP && !n_out && outputs_from_data(r, &n_out, e))
        return e->code;
    if (spec_model_new(s, r->be, r->dt, (int64_t)r->features, n_out, &r->model, e))
        return e->code;
    r->outputs = nn_num_outputs(r->model);   /* a layers stack's last linear layer sets it */
    struct rng rng;
    rng_seed(&rng, s->seed);
    return nn_init(r->model, r->cs.init, &rng, e);
}

/* The spec's optimizer over r->model, and the tape the steps record on. */
static int make_optimizer(struct run *r, struct err *e)
{
    if (optim_create(&r->cs.optim, r->model, &r->opt, e))
        return e->code;
    r->tape = ag_tape_new(e);
    return r->tape ? 0 : e->code;
}

/* Batches in an epoch of rows rows, as len(DataLoader): ceil(rows / batch), floor with drop_last; 0 unknown. */
static int64_t batches_of(uint64_t rows, const struct job_spec *s)
{
    uint64_t b = (uint64_t)s->batch_size;
    return (int64_t)(s->data.drop_last ? rows / b : (rows + b - 1) / b);
}

/* init {"from": ...}: the parameters of another job's checkpoint or a .safetensors URL, over nn_init's. */
static int load_init(const struct train_task *t, struct run *r, struct err *e)
{
    const struct train_plan *p = t->plan;
    struct init_from_access acc = {
        .data_roots = p->data_roots,
        .n_data_roots = p->n_data_roots,
        .cache_dir = p->cache_dir,
        .cache_limit = p->cache_limit,
        .cancel = t->hooks->abort_io,
    };
    return init_from_load(t->spec, p->init_fd, &acc, r->model, e);
}

/*
 * data.test, read with the training set's settings (its own rows counted, no shuffling). A
 * replica reads only the partitions its shares of the test batches touch, and evaluates its
 * shares (evaluate.h).
 */
static int open_test(struct run *r, const struct job_spec *s, const struct dataset_config *train,
                     struct err *e)
{
    if (!s->data.test)
        return 0;
    struct dataset_config dc = *train;
    dc.url = s->data.test;
    dc.share_rank = r->world ? r->rank : 0;
    dc.share_n = r->world ? train_world_size(r->world) : 0;
    return evaluate_open(&dc, r->features, &r->eval, e);
}

static int run_open(struct run *r, const struct train_task *t, struct err *e)
{
    const struct job_spec *s = t->spec;
    spec_compile(s, &r->cs);
    r->dt = r->cs.dtype;
    /* A stop (cancel, pause, shutdown, a stuck worker) interrupts a download rather than waiting it out. */
    struct http_options http;
    http_options_default(&http);
    http.cancel = t->hooks->abort_io;
    struct store_remote remote = r->cs.remote;
    remote.cache_dir = t->plan->cache_dir;
    remote.cache_limit = t->plan->cache_limit;
    remote.list = t->plan->list_limits;
    remote.http = &http;
    struct dataset_config dc = r->cs.dataset;
    dc.remote = &remote;
    dc.data_roots = t->plan->data_roots;
    dc.n_data_roots = t->plan->n_data_roots;
    if (r->world && !r->cs.outputs_from_labels) { /* a replica's dataset writes its shares' rows only */
        dc.share_rank = r->rank;
        dc.share_n = train_world_size(r->world);
        r->share_only = dc.share_n > 1;
    }
    if (dataset_open(&dc, &r->ds, e))
        return e->code;
    r->features = dataset_num_features(r->ds);
    if (open_test(r, s, &dc, e))
        return e->code;
    r->loss = r->cs.loss;
    dataset_tell(r->ds, &r->cursor);
    r->per_epoch = batches_of(dataset_num_rows(r->ds), s);
    /*
     * Slots in the device's host memory (pinned with CUDA), and two device buffers of a full
     * batch that the slots are copied into. Where host memory is the device's (the CPU) a
     * batch of resident rows is read where it lies: the step only reads it.
     */
    size_t elem = r->dt == TENSOR_F32 ? sizeof(float) : sizeof(double);
    if (wdev_upload_new(r->dev, (size_t)s->batch_size * (1 + r->features) * elem, &r->upload, e))
        return err_prefix(e, "batch buffer on %s", r->be->name);
    struct prefetch_config pc = {.slots = RUNNER_RING_SLOTS, .views = wdev_upload_in_place(r->upload),
                                 .allocator = wdev_ring_allocator(r->dev)};
    r->cache_epoch = UINT64_MAX;
    struct err ce = {0};
    if (!s->data.shuffle_partitions && !s->data.shuffle_buffer && wdev_cache_new(r->dev, &r->cache, &ce))
        log_warn("job %s: the training set will not stay on %s: %s", t->job_id, r->be->name, ce.msg);
    const char *resume_from = t->plan->resume_from;
    if (resume_from) {
        /*
         * Going on from a checkpoint: the model takes the checkpoint's shape (its outputs may
         * have come from the data), then its parameters and the optimizer's state, and the
         * dataset seeks to its cursor before the prefetcher owns it.
         */
        struct snapshot_meta meta;
        if (snapshot_peek(resume_from, &meta, e) || build_model(r, s, meta.outputs, e) ||
            make_optimizer(r, e) || snapshot_load(resume_from, r->model, r->opt, &meta, e) ||
            dataset_seek(r->ds, &meta.cursor, e))
            return err_prefix(e, "resuming from %s", resume_from);
        r->it0 = meta.iterations;
        r->cursor = meta.cursor;
        if (meta.epoch_iterations > 0)
            r->per_epoch = meta.epoch_iterations;
        else if (!r->per_epoch)   /* seeking may have counted the rows */
            r->per_epoch = batches_of(dataset_num_rows(r->ds), s);
        return prefetch_start(r->ds, &pc, &r->pf, e);
    }
    if (prefetch_start(r->ds, &pc, &r->pf, e))
        return e->code;
    if (r->cs.outputs_from_labels && runner_next_batch(t, r, &r->first, e))
        return e->code == ERR_OK ? err_set(e, ERR_CANCELLED, "stopped while waiting for data") : e->code;
    return build_model(r, s, 0, e) || load_init(t, r, e) || make_optimizer(r, e) ? e->code : 0;
}

/*
 * Forward, loss, backward, clip, update; the model and tape are left clean even on failure.
 * The whole step is queued before anything is read back, so on a GPU the host waits once a
 * step (for the loss and the norm), not after the forward and again after the norm.
 */
/* weight: the share of the batch x holds, for a replica (1 alone). */
static int step_on(struct run *r, struct tensor *x, struct tensor *y, double weight, double max_norm,
                   double *loss_out, double *norm_out, struct err *e)
{
    /* One call, so the linear model with MSE takes core's fused single-pass path. */
    struct tensor *loss = x->shape[0] ? nn_forward_loss(r->model, r->tape, r->loss, x, y, e) : NULL;
    int failed;
    if (r->world) {   /* the share's gradient and loss, then the batch's (replica.h) */
        *loss_out = 0;
        failed = (x->shape[0] && (!loss || tensor_item(loss, loss_out, e))) ||
                 replica_backward(r->world, r->rank, r->model, r->tape, loss, weight, r->bucket_bytes, e) ||
                 replica_reduce(r->world, r->rank, r->model, weight, loss_out, e) ||
                 optim_step_clipped(r->opt, max_norm, e) || optim_last_grad_norm(r->opt, norm_out, e);
    } else {
        failed = !loss || ag_backward(r->tape, loss, e) || optim_step_clipped(r->opt, max_norm, e) ||
                 tensor_item(loss, loss_out, e) || optim_last_grad_norm(r->opt, norm_out, e);
    }
    nn_zero_grad(r->model);
    ag_tape_reset(r->tape);
    if (failed)
        return e->code ? e->code : err_set(e, ERR_INTERNAL, "training step failed");
    return 0;
}

/*
 * One step on a batch in a ring slot: PyTorch's
 *   X, y = batch[:, 1:], batch[:, 0]; loss = mse(X @ w + b, y); backward; clip; step; zero_grad
 * with X and y as views of the batch, never copies. A replica views its share's rows: all that
 * data holds when its dataset wrote only those (share_only), else rows lo.. of the batch.
 */
int runner_step(struct run *r, void *data, size_t rows, double max_norm, double *loss_out,
                    double *norm_out, struct err *e)
{
    size_t lo = 0, count = rows;
    if (r->world)
        replica_share(rows, r->rank, train_world_size(r->world), &lo, &count);
    size_t row_bytes = (1 + r->features) * (r->dt == TENSOR_F32 ? sizeof(float) : sizeof(double));
    int64_t shape[2] = {(int64_t)count, (int64_t)(1 + r->features)};
    struct tensor *batch = NULL, *x = NULL, *y = NULL;
    int rc;
    char *first = (char *)data + (r->share_only ? 0 : lo) * row_bytes;
    if (!(batch = tensor_wrap(r->be, first, r->dt, 2, shape, NULL, e)) ||
        !(x = tensor_slice(batch, 1, 1, shape[1], e)) || !(y = tensor_select(batch, 1, 0, e)))
        rc = e->code ? e->code : err_set(e, ERR_INTERNAL, "cannot view the batch");
    else
        rc = step_on(r, x, y, (double)count / (double)rows, max_norm, loss_out, norm_out, e);
    tensor_free(y);
    tensor_free(x);
    tensor_free(batch);
    return rc;
}

static int copy_params(struct nn_model *m, struct job_params **out, struct err *e)
{
    struct job_params *ps = calloc(1, sizeof *ps);
    int n = nn_num_params(m);
    if (!ps || !(ps->p = calloc((size_t)n, sizeof *ps->p))) {
        free(ps);
        return err_set(e, ERR_NOMEM, "copying parameters: out of memory");
    }
    for (int i = 0; i < n; i++) {
        struct tensor *p = nn_param(m, i);
        struct job_param *jp = &ps->p[i];
        snprintf(jp->name, sizeof jp->name, "%s", nn_param_name(m, i));
        jp->rows = p->ndim > 0 ? p->shape[0] : 1;
        jp->cols = p->ndim > 1 ? p->shape[1] : 0;
        jp->values = malloc((size_t)tensor_numel(p) * sizeof(double));
        ps->n = i + 1; /* so job_params_free frees this one too */
        int rc = jp->values ? tensor_copy_to_host_f64(p, jp->values, e)
                            : err_set(e, ERR_NOMEM, "copying parameters: out of memory");
        if (rc) {
            job_params_free(ps);
            return rc;
        }
    }
    *out = ps;
    return 0;
}

/*
 * Writes a checkpoint after iterations iterations (r->cursor is where the next batch
 * starts) and tells the caller, which records it and then removes the older files
 * (not here: the caller may not know of this one yet when the process is killed).
 * A failure is logged, not fatal: training goes on, and resuming uses the older one.
 */
static void checkpoint(const struct train_task *t, struct run *r, int64_t iterations)
{
    const char *dir = t->plan->ckpt_dir;
    if (!dir || !primary(t))
        return;
    struct snapshot_meta meta = {.iterations = iterations, .cursor = r->cursor,
                                 .features = (int64_t)r->features, .outputs = r->outputs,
                                 .epoch_iterations = r->per_epoch};
    snprintf(meta.job_id, sizeof meta.job_id, "%s", t->job_id);
    char path[4200];
    struct err e = {0};
    if (snapshot_path(dir, iterations, path, sizeof path, &e) ||
        snapshot_save(path, r->model, r->opt, &meta, &e)) {
        log_warn("job %s: no checkpoint at iteration %lld: %s", t->job_id, (long long)iterations, e.msg);
        return;
    }
    if (t->hooks->checkpoint)
        t->hooks->checkpoint(t->hooks->ctx, path, iterations, meta.cursor.epoch);
}

/*
 * Waits for the prefetch thread's next batch, a little at a time so a stop is seen (and the
 * worker beats). ERR_CANCELLED with e untouched when a stop came first.
 */
int runner_next_batch(const struct train_task *t, struct run *r, struct prefetch_slot *slot,
                      struct err *e)
{
    for (;;) {
        if (prefetch_next(r->pf, 0.2, slot, e))
            return e->code;
        if (slot->data)
            return 0;
        beat(t);
        if (runner_stop_asked(t) != TRAIN_RUN)
            return ERR_CANCELLED;
    }
}

/* A stop request at iteration it: a checkpoint unless the latest covers it, then ERR_CANCELLED. */
static int stopped(struct train_task *t, struct run *r, int64_t it, int64_t saved, struct err *e)
{
    if (it > saved)
        checkpoint(t, r, it);
    return err_set(e, ERR_CANCELLED, "%s at iteration %lld",
                   runner_stop_asked(t) == TRAIN_STOP_CANCEL ? "cancelled" : "stopped", (long long)it);
}

/* Whether the job is done after it iterations, r->cursor being where the next batch starts. */
static bool finished(const struct job_spec *s, const struct run *r, int64_t it)
{
    return s->epochs ? r->cursor.epoch >= (uint64_t)s->epochs : it >= s->iterations;
}

/* The iterations the job does in all: the spec's, or its epochs' once an epoch's length is known. */
static int64_t planned(const struct job_spec *s, const struct run *r)
{
    return s->epochs ? s->epochs * r->per_epoch : s->iterations;
}

/*
 * What slot says of the epoch's length, when row counts did not say it before: it is the last
 * batch of its epoch, or the first of a new one after a tail that drop_last dropped.
 */
static void learn_epoch_length(struct run *r, const struct prefetch_slot *slot)
{
    if (slot->next.epoch > slot->cursor.epoch)
        r->per_epoch = (int64_t)slot->cursor.batch + 1;
    else if (slot->cursor.epoch > r->cursor.epoch && r->cursor.batch > 0)
        r->per_epoch = (int64_t)r->cursor.batch;
}

/*
 * Whether iteration it (r->cursor past its batch) is the job's last: the dataset moves the
 * cursor to the next epoch with an epoch's last batch (dataset.h), and an epochs job whose
 * epoch length is known can also count.
 */
static bool last_iteration(const struct job_spec *s, const struct run *r, int64_t it)
{
    return finished(s, r, it + 1) || (s->epochs && r->per_epoch > 0 && it + 1 >= planned(s, r));
}

/* After iteration it: every eval_every iterations, after the last always; by every replica. */
static bool eval_due(const struct train_task *t, const struct run *r, int64_t it)
{
    const struct job_spec *s = t->spec;
    return s->data.test &&
           (last_iteration(s, r, it) || (s->eval_every && (it + 1) % s->eval_every == 0));
}

/* Between evaluation batches: the worker beats, and only a cancel cuts a pass short. */
static bool eval_go_on(void *ctx)
{
    const struct train_task *t = ctx;
    beat(t);
    return runner_stop_asked(t) != TRAIN_STOP_CANCEL;
}

/* A replica's partial sums of an evaluation, summed over the world as the step's loss is. */
static int eval_reduce(void *ctx, double *sums, size_t n, struct err *e)
{
    const struct train_task *t = ctx;
    return replica_sum(t->plan->world, t->plan->rank, sums, n, e);
}

/*
 * The loss on data.test of the model as it is now, on the backend it trains on. Replicas split
 * each test batch as they split a training batch, and every one gets the whole set's loss.
 */
static int run_eval(struct train_task *t, struct run *r, double *out, struct err *e)
{
    struct evaluate_target tg = {.be = r->be, .dt = r->dt, .upload = r->upload,
                                 .go_on = eval_go_on, .ctx = t, .reduce = eval_reduce};
    return evaluate_loss(r->eval, &tg, r->model, r->loss, out, e);
}

/*
 * A stop that cut iteration it's evaluation short (a cancel, or a download of the test set
 * given up): the step is done but its row would lack the evaluation, so neither the row nor
 * a checkpoint is written, and a resumed job goes on from its latest checkpoint instead.
 */
static int eval_stopped(struct train_task *t, int64_t it, struct err *e)
{
    err_clear(e);
    return err_set(e, ERR_CANCELLED, "%s during the evaluation after iteration %lld",
                   runner_stop_asked(t) == TRAIN_STOP_CANCEL ? "cancelled" : "stopped", (long long)it);
}

static int train(struct train_task *t, struct run *r, struct err *e)
{
    const struct job_spec *s = t->spec;
    int64_t saved = r->it0;   /* iterations covered by the latest checkpoint */
    int64_t it = r->it0;
    for (; !finished(s, r, it); it++) {
        beat(t);
        if (runner_stop_asked(t) != TRAIN_RUN)
            return stopped(t, r, it, saved, e);
        double t0 = runner_mono_now();
        struct batch b;
        int rc = runner_feed_take(t, r, &b, e);
        if (rc == ERR_CANCELLED && !e->code)
            return stopped(t, r, it, saved, e);
        if (rc)
            return rc;
        learn_epoch_length(r, &b.slot);
        if (s->epochs && b.slot.cursor.epoch >= (uint64_t)s->epochs) {
            /* A guard: the dataset says an epoch's end with its last batch, so that batch's row already
               had its evaluation (last_iteration); a batch of the epoch after the last is not trained on. */
            r->cursor = b.slot.cursor;
            if (b.slot.data)
                prefetch_release(r->pf, &b.slot);
            break;
        }
        double t1 = runner_mono_now();
        double loss = 0, norm = 0, waited = 0;
        size_t rows = b.slot.rows;
        rc = rows ? 0 : err_set(e, ERR_INVALID_DATA, "the dataset returned an empty batch");
        if (!rc)
            rc = runner_feed_step(t, r, &b, it, &waited, &loss, &norm, e);
        r->cursor = b.slot.next;
        if (b.slot.data)
            prefetch_release(r->pf, &b.slot);
        if (r->world)
            train_world_note_step(r->world, r->rank, runner_mono_now() - t1 - waited, t1 - t0 + waited);
        if (rc == ERR_INVALID_DATA)   /* the batch's data: say which batch */
            return err_prefix(e, "iteration %lld (batch %llu of epoch %llu)", (long long)it,
                              (unsigned long long)b.slot.cursor.batch,
                              (unsigned long long)b.slot.cursor.epoch);
        if (rc)
            return rc;
        double t2 = runner_mono_now();
        double eval_loss = NAN;
        if (isfinite(loss) && eval_due(t, r, it)) {
            rc = run_eval(t, r, &eval_loss, e);
            if (rc == ERR_CANCELLED && runner_stop_asked(t) != TRAIN_RUN)
                return eval_stopped(t, it, e);
        }
        struct metrics_row row = {.v = {
            [METRIC_ITERATION] = (double)it,
            [METRIC_TIME] = clock_s(CLOCK_REALTIME),
            [METRIC_LOSS] = loss,
            [METRIC_SECONDS_PER_ITERATION] = t2 - t1 - waited,
            [METRIC_SAMPLES_PER_SECOND] = t2 > t0 ? (double)rows / (t2 - t0) : 0,
            [METRIC_DATA_WAIT_SECONDS] = t1 - t0 + waited,
            [METRIC_GRAD_NORM] = norm,
            [METRIC_LR] = s->optimizer.lr,
            [METRIC_EVAL_LOSS] = eval_loss,
        }};
        struct dataset_stats ds_st;
        dataset_stats(r->ds, &ds_st);
        struct train_progress progress = {.epoch = r->cursor.epoch, .planned = planned(s, r),
                                          .bytes_fetched = ds_st.bytes_fetched, .bytes_total = ds_st.bytes_total};
        if (t->hooks->metrics && primary(t))
            t->hooks->metrics(t->hooks->ctx, &row, &progress);
        if (rc)
            return rc;   /* the evaluation failed; the step's row is in */
        if (!isfinite(loss))
            return err_set(e, ERR_DIVERGED,
                           "loss is %g at iteration %lld: lower optimizer.lr or set clip_grad_norm",
                           loss, (long long)it);
        if (s->checkpoint_every && (it + 1) % s->checkpoint_every == 0 && !finished(s, r, it + 1)) {
            checkpoint(t, r, it + 1);
            saved = it + 1;
        }
    }
    checkpoint(t, r, it);   /* the final one, always */
    return copy_params(r->model, &t->params, e);
}

/* The device this task trains on: its GPU's when the worker has one (the CUDA backend has
 * every kernel core's models and losses use), else the CPU, driven the same way. */
static int pick_backend(struct run *r, const struct train_task *t, struct err *e)
{
    const struct train_plan *p = t->plan;
    if (p->dev_error)
        return err_set(e, ERR_DEVICE, "%s", p->dev_error->msg[0] ? p->dev_error->msg : "no device");
    r->dev = p->dev;
    if (!r->dev && wdev_open(be_cpu_factory(), 0, &r->own_dev, e))
        return e->code;
    if (!r->dev)
        r->dev = r->own_dev;
    r->be = wdev_backend(r->dev);
    r->world = p->world;
    r->rank = p->rank;
    r->bucket_bytes = (size_t)(t->spec->replica_bucket_mb * 1024 * 1024);   /* MiB, as DDP's bucket_cap_mb */
    return 0;
}

void train_run(const struct train_plan *plan, const struct train_hooks *hooks)
{
    struct train_task t = {.spec = plan->spec, .plan = plan, .hooks = hooks,
                           .job_id = plan->job_id ? plan->job_id : ""};
    struct run r = {0};
    struct err e = {0};
    if (!pick_backend(&r, &t, &e) && !run_open(&r, &t, &e))
        train(&t, &r, &e);
    if (plan->world && e.code != ERR_OK)
        replica_leave(plan->world, plan->rank, &e);   /* its peers must not wait for it */
    if (plan->world)
        replica_done(plan->world, plan->rank);   /* its NCCL communicator, before its device goes */
    run_free(&r);
    if (e.code != ERR_OK && e.code != ERR_CANCELLED && !e.msg[0])
        err_set(&e, e.code, "training failed");
    if (hooks->done)
        hooks->done(hooks->ctx, &e, t.params);
    else
        job_params_free(t.params);
}
