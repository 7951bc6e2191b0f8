/* comm_dev_none.c — device worlds in a build without NCCL: they can be made, but never reduce. */
#include "comm.h"

#include <stdlib.h>

struct comm_dev {
    int n;
};

static int no_nccl(struct err *e)
{
    return err_set(e, ERR_DEVICE, "replicas on GPUs need NCCL, and this traind was built without it "
                   "(-Dnccl=disabled, or no nccl.h beside the CUDA toolkit)");
}

bool comm_dev_available(struct err *e)
{
    no_nccl(e);
    return false;
}

int comm_dev_new(int n, struct comm_dev **out, struct err *e)
{
    *out = NULL;
    if (n < 1)
        return err_set(e, ERR_INVALID_ARG, "comm: a world needs at least 1 replica, not %d", n);
    if (!(*out = calloc(1, sizeof **out)))
        return err_set(e, ERR_NOMEM, "comm: no memory for a world of %d GPU replicas", n);
    (*out)->n = n;
    return 0;
}

int comm_dev_make_id(unsigned char id[COMM_DEV_ID_BYTES], struct err *e)
{
    (void)id;
    return no_nccl(e);
}

int comm_dev_new_span(int n, int offset, int total, const unsigned char id[COMM_DEV_ID_BYTES],
                      struct comm_span *watch, struct comm_dev **out, struct err *e)
{
    (void)offset, (void)total, (void)id, (void)watch;
    return comm_dev_new(n, out, e);
}

bool comm_dev_timed_out(struct comm_dev *c)
{
    (void)c;
    return false;
}

void comm_dev_free(struct comm_dev *c)
{
    free(c);
}

int comm_dev_allreduce(struct comm_dev *c, int rank, const struct backend *be, void *buf,
                       size_t count, enum tensor_dtype dt, struct err *e)
{
    (void)c, (void)rank, (void)be, (void)buf, (void)count, (void)dt;
    return no_nccl(e);
}

int comm_dev_allreduce_start(struct comm_dev *c, int rank, const struct backend *be, void *buf,
                             size_t count, enum tensor_dtype dt, struct err *e)
{
    (void)c, (void)rank, (void)be, (void)buf, (void)count, (void)dt;
    return no_nccl(e);
}

int comm_dev_allreduce_end(struct comm_dev *c, int rank, const struct backend *be, struct err *e)
{
    (void)c, (void)rank, (void)be, (void)e;
    return 0;   /* nothing was queued */
}

void comm_dev_set_timeout(struct comm_dev *c, double seconds)
{
    (void)c, (void)seconds;
}

int comm_dev_missing(struct comm_dev *c)
{
    (void)c;
    return -1;
}

int comm_dev_abort(struct comm_dev *c, const char *why)
{
    (void)c, (void)why;
    return 0;
}

void comm_dev_leave(struct comm_dev *c, int rank)
{
    (void)c, (void)rank;
}
