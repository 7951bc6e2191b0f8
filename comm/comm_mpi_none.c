/* comm_mpi_none.c — comm_mpi.h in a build without MPI: there is no world, so traind is one process. */
#include "comm_mpi.h"

int comm_mpi_init(int *argc, char ***argv, struct comm_mpi **out, struct err *e)
{
    (void)argc, (void)argv, (void)e;
    *out = NULL;
    return 0;
}

void comm_mpi_finalize(struct comm_mpi *c)
{
    (void)c;
}

int comm_mpi_rank(const struct comm_mpi *c)
{
    (void)c;
    return 0;
}

int comm_mpi_size(const struct comm_mpi *c)
{
    (void)c;
    return 1;
}

int comm_mpi_max_tag(const struct comm_mpi *c)
{
    (void)c;
    return 0;
}

static int none(struct err *e)
{
    return err_set(e, ERR_INTERNAL, "this traind was built without MPI (meson -Dmpi=enabled)");
}

int comm_mpi_send(struct comm_mpi *c, int to, const void *buf, size_t len, int64_t timeout_ms,
                  struct err *e)
{
    (void)c, (void)to, (void)buf, (void)len, (void)timeout_ms;
    return none(e);
}

int comm_mpi_recv(struct comm_mpi *c, int *from, char **buf, size_t *len, int64_t wait_ms,
                  struct err *e)
{
    (void)c, (void)from, (void)wait_ms;
    *buf = NULL;
    *len = 0;
    return none(e);
}

int comm_span_new(struct comm_mpi *c, const int *ranks, int n, int me, int tag, int64_t timeout_ms,
                  struct comm_span **out, struct err *e)
{
    (void)c, (void)ranks, (void)n, (void)me, (void)tag, (void)timeout_ms;
    *out = NULL;
    return none(e);
}

void comm_span_free(struct comm_span *s)
{
    (void)s;
}

int comm_span_allreduce(struct comm_span *s, void *buf, size_t count, enum tensor_dtype dt,
                        struct err *e)
{
    (void)s, (void)buf, (void)count, (void)dt;
    return none(e);
}

bool comm_span_ended(struct comm_span *s, char *why, size_t cap)
{
    (void)s, (void)why, (void)cap;
    return false;
}

bool comm_span_timed_out(const struct comm_span *s)
{
    (void)s;
    return false;
}

void comm_span_abort(struct comm_span *s, int code, const char *why)
{
    (void)s, (void)code, (void)why;
}
