/* replica.c — a job's replicas in one process: shares of a batch, and its gradient summed over them by comm/'s all-reduce. */
#include "replica.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "comm.h"
#include "nn.h"

struct train_world {
    struct comm_local *comm;
    pthread_mutex_t mu;
    int first_rank;             /* the rank that ended the world; -1 while it goes on */
    struct err first;           /* and why */
    double *reduce_s;           /* by rank: time in replica_reduce */
};

int train_world_new(int n, struct train_world **out, struct err *e)
{
    *out = NULL;
    struct train_world *w = calloc(1, sizeof *w);
    if (!w)
        return err_set(e, ERR_NOMEM, "out of memory for %d replicas", n);
    if (!(w->reduce_s = calloc((size_t)(n > 0 ? n : 1), sizeof *w->reduce_s))) {
        free(w);
        return err_set(e, ERR_NOMEM, "out of memory for %d replicas", n);
    }
    if (comm_local_new(n, &w->comm, e)) {
        free(w->reduce_s);
        free(w);
        return e->code;
    }
    pthread_mutex_init(&w->mu, NULL);
    w->first_rank = -1;
    *out = w;
    return 0;
}

void train_world_free(struct train_world *w)
{
    if (!w)
        return;
    comm_local_free(w->comm);
    pthread_mutex_destroy(&w->mu);
    free(w->reduce_s);
    free(w);
}

int train_world_size(const struct train_world *w)
{
    return comm_local_size(w->comm);
}

void replica_share(size_t rows, int rank, int n, size_t *lo, size_t *count)
{
    /* floor(rows * r / n): shares of floor or ceil(rows / n) rows, in rank order. */
    size_t q = rows / (size_t)n, rem = rows % (size_t)n;
    size_t r = (size_t)rank;
    *lo = r * q + (r * rem) / (size_t)n;
    size_t hi = (r + 1) * q + ((r + 1) * rem) / (size_t)n;
    *count = hi - *lo;
}

void replica_leave(struct train_world *w, int rank, const struct err *e)
{
    pthread_mutex_lock(&w->mu);
    if (w->first_rank < 0) {
        w->first_rank = rank;
        w->first = *e;
    }
    pthread_mutex_unlock(&w->mu);
    comm_local_abort(w->comm, e->msg[0] ? e->msg : "a replica left");
}

/* A collective failed because the world ended: the reason of the rank that ended it. */
static int ended(struct train_world *w, int rank, struct err *e)
{
    pthread_mutex_lock(&w->mu);
    int who = w->first_rank;
    struct err first = w->first;
    pthread_mutex_unlock(&w->mu);
    if (who < 0 || who == rank)
        return e->code;
    if (first.code == ERR_CANCELLED)
        return err_set(e, ERR_CANCELLED, "replica %d stopped: %s", who, first.msg);
    err_clear(e);
    return err_set(e, first.code ? first.code : ERR_INTERNAL, "replica %d: %s", who,
                   first.msg[0] ? first.msg : "failed");
}

double train_world_reduce_seconds(const struct train_world *w, int rank)
{
    return w->reduce_s[rank];
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int replica_reduce(struct train_world *w, int rank, struct nn_model *m, double weight, double *loss,
                   struct err *e)
{
    double t0 = mono_s();
    struct tensor *g = nn_grads_flat(m);
    double l = *loss * weight;
    int rc = nn_grads_scale(m, weight, e) ||
             comm_local_allreduce(w->comm, rank, g->data, (size_t)tensor_numel(g), g->dtype, COMM_SUM, e) ||
             comm_local_allreduce(w->comm, rank, &l, 1, TENSOR_F64, COMM_SUM, e);
    w->reduce_s[rank] += mono_s() - t0;
    if (rc)
        return e->code == ERR_CANCELLED ? ended(w, rank, e) : e->code;
    *loss = l;
    return 0;
}
