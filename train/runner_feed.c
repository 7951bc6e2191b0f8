/* runner_feed.c — batches from the prefetch ring to the step, the next one fetched (and on a GPU copied) under the step before. */
#include "runner_impl.h"

#include "log.h"
#include "replica.h"

/* Bytes a slot holding a batch of rows fills: its share's rows for a replica whose dataset writes only those. */
static size_t batch_bytes(const struct run *r, size_t rows)
{
    size_t lo, count = rows;
    if (r->share_only)
        replica_share(rows, r->rank, train_world_size(r->world), &lo, &count);
    return count * (1 + r->features) * (r->dt == TENSOR_F32 ? sizeof(float) : sizeof(double));
}

/* Whether a batch is trained on: not past the last epoch (a dropped tail hid its end), not empty. */
static bool steppable(const struct job_spec *s, const struct prefetch_slot *slot)
{
    return slot->rows && !(s->epochs && slot->cursor.epoch >= (uint64_t)s->epochs);
}

/* The device's copy of slot's batch from an earlier epoch, or NULL. */
static void *cached(struct run *r, const struct train_task *t, const struct prefetch_slot *slot)
{
    if (!r->cache || r->cache_epoch == UINT64_MAX || slot->cursor.epoch <= r->cache_epoch)
        return NULL;
    void *p = wdev_cache_get(r->cache, slot->cursor.batch, slot->rows);
    if (p && !r->cache_told) {
        size_t bytes, n = wdev_cache_count(r->cache, &bytes);
        log_info("job %s: %zu batches (%.1f MB) of the training set stay on %s; epochs after %llu "
                 "copy those to the device no more", t->job_id, n, (double)bytes / 1e6, r->be->name,
                 (unsigned long long)r->cache_epoch);
        r->cache_told = true;
    }
    return p;
}

/* Batch slot, just copied to dev, stays on the device when it belongs to the epoch the cache keeps. */
static int keep(struct run *r, const struct prefetch_slot *slot, const void *dev, struct err *e)
{
    if (!r->cache)
        return 0;
    if (r->cache_epoch == UINT64_MAX && slot->cursor.batch == 0)
        r->cache_epoch = slot->cursor.epoch;
    bool kept;
    if (slot->cursor.epoch != r->cache_epoch)
        return 0;
    return wdev_cache_put(r->cache, slot->cursor.batch, dev, slot->rows, batch_bytes(r, slot->rows), &kept, e);
}

/*
 * A batch's copy to the device with nothing to overlap: started, waited for, its slot given
 * back (kept for train() to give back after the step where the step reads it in place).
 */
static int upload_now(struct run *r, struct batch *b, struct err *e)
{
    int rc = wdev_upload_start(r->upload, b->slot.data, batch_bytes(r, b->slot.rows), e) ||
             wdev_upload_finish(r->upload, &b->data, e) || keep(r, &b->slot, b->data, e) ? e->code : 0;
    if (rc)
        wdev_upload_abandon(r->upload);   /* before the slot goes back: the copy may still read it */
    if (rc || !wdev_upload_in_place(r->upload)) {
        prefetch_release(r->pf, &b->slot);
        b->slot.data = NULL;
    }
    return rc;
}

/*
 * The batch of the next iteration: r->first, or the one fetched ahead, or the prefetcher's
 * next. On a GPU it is on the device (its slot given back) unless it is not steppable; on
 * the CPU it is read in its slot. ERR_CANCELLED with e untouched when a stop came first.
 */
int runner_feed_take(const struct train_task *t, struct run *r, struct batch *b, struct err *e)
{
    *b = (struct batch){.slot = r->first};
    r->first.data = NULL;
    int state = r->ahead_state;
    r->ahead_state = AHEAD_NONE;
    if (state == AHEAD_FAILED) {
        *e = r->ahead_err;
        return e->code;
    }
    if (state == AHEAD_ON_DEVICE || state == AHEAD_ON_HOST) {
        b->slot = r->ahead;
        b->data = state == AHEAD_ON_DEVICE ? r->ahead_dev : r->ahead.data;
        b->cached = state == AHEAD_ON_DEVICE && r->ahead_cached;
        r->ahead.data = NULL;
        return 0;
    }
    int rc = b->slot.data ? 0 : runner_next_batch(t, r, &b->slot, e);
    if (rc)
        return rc;
    b->data = b->slot.data;
    if (!steppable(t->spec, &b->slot))
        return 0;
    if ((b->data = cached(r, t, &b->slot))) {
        b->cached = true;
        prefetch_release(r->pf, &b->slot);
        b->slot.data = NULL;
        return 0;
    }
    b->data = b->slot.data;
    return upload_now(r, b, e);
}

/*
 * Before step it on cur (whose next is cur_next): when another iteration follows, its batch
 * is fetched and its copy started into the other buffer (on the CPU, nothing to copy). A data
 * error or a stop while waiting is left for that iteration (the step goes on); a device
 * error is returned.
 */
static int fetch_ahead(const struct train_task *t, struct run *r, const struct dataset_cursor *cur_next,
                       int64_t it, double *waited, struct err *e)
{
    const struct job_spec *s = t->spec;
    if (s->epochs ? cur_next->epoch >= (uint64_t)s->epochs : it + 1 >= s->iterations)
        return 0;   /* never past the job's end */
    double t0 = runner_mono_now();
    struct err fe = {0};
    int rc = runner_next_batch(t, r, &r->ahead, &fe);
    *waited += runner_mono_now() - t0;
    if (rc) {
        r->ahead.data = NULL;
        if (fe.code) {
            r->ahead_err = fe;
            r->ahead_state = AHEAD_FAILED;
        }
        return 0;
    }
    if (!steppable(s, &r->ahead)) {
        r->ahead_state = AHEAD_ON_HOST;
        return 0;
    }
    if ((r->ahead_dev = cached(r, t, &r->ahead))) {
        prefetch_release(r->pf, &r->ahead);
        r->ahead.data = NULL;
        r->ahead_cached = true;
        r->ahead_state = AHEAD_ON_DEVICE;
        return 0;
    }
    r->ahead_cached = false;
    r->ahead_state = AHEAD_COPYING;
    return wdev_upload_start(r->upload, r->ahead.data, batch_bytes(r, r->ahead.rows), e);
}

/*
 * After step it: its buffer is free once its kernels are (stepped NULL: it read the cache);
 * the batch ahead is on the device, its slot given back unless the step reads it in place.
 */
static int finish_ahead(struct run *r, const void *stepped, struct err *e)
{
    if (stepped && wdev_upload_step_done(r->upload, stepped, e))
        return e->code;
    if (r->ahead_state != AHEAD_COPYING)
        return 0;
    if (wdev_upload_finish(r->upload, &r->ahead_dev, e) || keep(r, &r->ahead, r->ahead_dev, e))
        return e->code;
    if (!wdev_upload_in_place(r->upload)) {
        prefetch_release(r->pf, &r->ahead);
        r->ahead.data = NULL;
    }
    r->ahead_state = AHEAD_ON_DEVICE;
    return 0;
}

/*
 * One step on b. The next batch is fetched and its copy runs under it (fetch_ahead,
 * finish_ahead); *waited gets the time spent waiting for the prefetcher meanwhile.
 */
int runner_feed_step(const struct train_task *t, struct run *r, struct batch *b, int64_t it,
                     double *waited, double *loss, double *norm, struct err *e)
{
    double max_norm = t->spec->clip_grad_norm;
    if (fetch_ahead(t, r, &b->slot.next, it, waited, e) ||
        runner_step(r, b->data, b->slot.rows, max_norm, loss, norm, e) ||
        finish_ahead(r, b->cached ? NULL : b->data, e))
        return e->code;
    return 0;
}

