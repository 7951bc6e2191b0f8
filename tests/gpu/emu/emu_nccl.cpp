/* emu_nccl.cpp — the host emulation's NCCL: communicators of one process or of several meet by unique id in shared memory, and an all-reduce sums host buffers in rank order. */
#include <nccl.h>

#include "emu_cuda.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <new>
#include <vector>

/*
 * What comm/comm_nccl.c uses of NCCL, for the gpu-emu suite: ncclGetUniqueId,
 * ncclCommInitRankConfig (blocking or not), ncclCommGetAsyncError, ncclAllReduce (sum of
 * float32 or float64), ncclCommFinalize, ncclCommDestroy, ncclCommAbort, ncclGetErrorString.
 * The ranks of a clique are threads of one process or of several (one emulated device each):
 * the unique id names a POSIX shared-memory segment (made by ncclGetUniqueId) that holds the
 * clique's state under a process-shared mutex and condition variable, and each collective has
 * a segment of its own (the id and its number) into which every rank copies its send buffer.
 *
 * A non-blocking communicator's init stays ncclInProgress until every rank has called it, and
 * so does its all-reduces' state (ncclCommGetAsyncError) until every rank has called them: the
 * last to come sums the ranks' buffers element by element in rank order, ((b0 + b1) + b2) + ...,
 * in the buffers' dtype, into the collective's segment, and each rank copies the sum into its
 * own receive buffer when it next looks (ncclCommGetAsyncError, a later all-reduce, or a
 * blocking call's wait). The emulated streams do not see NCCL's work, so this state stands in
 * for it: a caller must poll it before it reads a receive buffer. The enqueue itself returns
 * ncclSuccess, as a real non-blocking one does once queued, but for a communicator's first
 * all-reduce, which returns ncclInProgress while it is not complete, as a real first one may
 * (its connections are set up then): NCCL then wants the state polled before the next call.
 * So a rank that never comes leaves its peers in progress for ever, as a real collective would
 * hang; an aborted communicator's pending collective never completes for its peers either.
 * Buffers must lie in live cudaMalloc blocks; the send buffer is read at the call (queued after
 * its stream's copies, as a kernel). At most EMU_RING collectives of a clique may be in flight
 * (a gradient's buckets of two steps). The segments go with the clique's last communicator; an
 * id no rank ever joined leaves its segment behind in /dev/shm (a few kilobytes).
 */

#define EMU_RING 64

namespace {

struct emu_op {
    uint64_t seq;
    bool used;
    bool broken;            /* a rank aborted, or called it unlike the others */
    int arrived;            /* ranks whose send buffer is in the segment */
    int taken;              /* ranks that copied the sum out (or left) */
    size_t count;
    ncclDataType_t dt;
};

/* In shared memory: what every communicator of the id sees. */
struct emu_clique {
    pthread_mutex_t mu;     /* process-shared */
    pthread_cond_t cv;
    int n;                  /* 0 until the first rank's init */
    int joined;
    int live;               /* communicators not yet destroyed or aborted */
    uint64_t completed;     /* collectives done, in order */
    emu_op ops[EMU_RING];   /* by seq % EMU_RING */
};

struct emu_taken {
    uint64_t seq;
    void *recv;
};

size_t dt_size(ncclDataType_t dt)
{
    return dt == ncclFloat32 ? 4 : dt == ncclFloat64 ? 8 : 0;
}

/* The segment of collective seq of the clique named id. */
void op_name(char *out, size_t cap, const char *id, uint64_t seq)
{
    snprintf(out, cap, "%s.%llu", id, (unsigned long long)seq);
}

/* The segment of op (n ranks' buffers, then the sum), mapped; NULL if it cannot be (or holds nothing). */
void *op_map(const char *id, const emu_op &op, int n, size_t *len)
{
    char name[NCCL_UNIQUE_ID_BYTES + 32];
    op_name(name, sizeof name, id, op.seq);
    *len = op.count * dt_size(op.dt) * (size_t)(n + 1);
    if (!*len)
        return nullptr;
    int fd = shm_open(name, O_RDWR | O_CREAT, 0600);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || ((size_t)st.st_size < *len && ftruncate(fd, (off_t)*len) != 0)) {
        if (fd >= 0)
            close(fd);
        return nullptr;
    }
    void *p = mmap(nullptr, *len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return p == MAP_FAILED ? nullptr : p;
}

/* With q->mu held: op's segment is no longer needed by anyone. */
void op_free(emu_clique *q, const char *id, emu_op &op)
{
    char name[NCCL_UNIQUE_ID_BYTES + 32];
    op_name(name, sizeof name, id, op.seq);
    shm_unlink(name);
    op.used = false;
}

/* With q->mu held: the collective op, every rank come, is summed in rank order into the segment's last part. */
template <typename T> void sum_into(T *b, size_t count, int n)
{
    T *acc = b + (size_t)n * count;
    for (size_t i = 0; i < count; i++)
        acc[i] = b[i];
    for (int r = 1; r < n; r++)
        for (size_t i = 0; i < count; i++)
            acc[i] += b[(size_t)r * count + i];
}

/* With q->mu held: completes q's collectives, in order, while their ranks have all come. */
void complete(emu_clique *q, const char *id)
{
    for (;;) {
        emu_op &op = q->ops[q->completed % EMU_RING];
        if (!op.used || op.seq != q->completed || op.arrived < q->n || op.broken)
            break;
        size_t len;
        void *b = op_map(id, op, q->n, &len);
        if (b && op.dt == ncclFloat32)
            sum_into<float>((float *)b, op.count, q->n);
        else if (b)
            sum_into<double>((double *)b, op.count, q->n);
        if (b)
            munmap(b, len);
        else if (op.count)
            op.broken = true;   /* the segment is gone: the collective never ends, as a lost one */
        if (op.broken)
            break;
        q->completed++;
    }
    pthread_cond_broadcast(&q->cv);
}

} // namespace

/* The type has an external name (nccl.h declares struct ncclComm), so not in the namespace. */
struct ncclComm {
    emu_clique *q;          /* this communicator's mapping of the clique */
    char id[NCCL_UNIQUE_ID_BYTES];
    int rank;
    bool blocking;
    uint64_t issued;        /* collectives called */
    std::vector<emu_taken> pending;   /* called, their sum not yet copied out */
};

namespace {

/* With q->mu held: comm's collectives that completed have their sum copied into its receive buffers. */
void take(ncclComm *comm)
{
    emu_clique *q = comm->q;
    while (!comm->pending.empty() && comm->pending.front().seq < q->completed) {
        emu_taken t = comm->pending.front();
        comm->pending.erase(comm->pending.begin());
        emu_op &op = q->ops[t.seq % EMU_RING];
        size_t len, bytes = op.count * dt_size(op.dt);
        void *b = op_map(comm->id, op, q->n, &len);
        if (b) {
            memcpy(t.recv, (char *)b + (size_t)q->n * bytes, bytes);
            munmap(b, len);
        }
        if (++op.taken == q->n)
            op_free(q, comm->id, op);
    }
}

bool in_progress(ncclComm *comm)
{
    take(comm);
    return comm->q->joined < comm->q->n || !comm->pending.empty();
}

/* With q->mu held: comm's communicator is gone; the clique's segments go with its last. */
void drop(ncclComm *comm)
{
    emu_clique *q = comm->q;
    for (auto &op : q->ops)
        if (op.used && op.seq >= q->completed && comm->issued > op.seq)
            op.broken = true;   /* its peers will never see it complete */
    for (auto &t : comm->pending) {
        emu_op &op = q->ops[t.seq % EMU_RING];
        if (t.seq < q->completed && ++op.taken == q->n)
            op_free(q, comm->id, op);
    }
    if (--q->live == 0) {
        for (auto &op : q->ops)
            if (op.used)
                op_free(q, comm->id, op);
        shm_unlink(comm->id);
    }
    pthread_cond_broadcast(&q->cv);
}

pthread_mutex_t ids_mu = PTHREAD_MUTEX_INITIALIZER;
uint64_t ids;

} // namespace

extern "C" {

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0, sizeof *id);
    pthread_mutex_lock(&ids_mu);
    unsigned long long k = ++ids;
    pthread_mutex_unlock(&ids_mu);
    snprintf(id->internal, sizeof id->internal, "/traind-emu-nccl-%d-%llu", (int)getpid(), k);
    int fd = shm_open(id->internal, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0)
        return ncclSystemError;
    void *p = MAP_FAILED;
    if (ftruncate(fd, sizeof(emu_clique)) == 0)
        p = mmap(nullptr, sizeof(emu_clique), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        shm_unlink(id->internal);
        return ncclSystemError;
    }
    emu_clique *q = new (p) emu_clique{};
    pthread_mutexattr_t ma;
    pthread_condattr_t ca;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_condattr_init(&ca);
    pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&q->mu, &ma);
    pthread_cond_init(&q->cv, &ca);
    pthread_mutexattr_destroy(&ma);
    pthread_condattr_destroy(&ca);
    munmap(p, sizeof(emu_clique));
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config)
{
    if (!comm || nranks < 1 || rank < 0 || rank >= nranks || !memchr(id.internal, 0, sizeof id.internal))
        return ncclInvalidArgument;
    int fd = shm_open(id.internal, O_RDWR, 0600);
    if (fd < 0)
        return ncclInvalidArgument;   /* no such id, or its clique has ended */
    void *p = mmap(nullptr, sizeof(emu_clique), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return ncclSystemError;
    emu_clique *q = (emu_clique *)p;
    pthread_mutex_lock(&q->mu);
    if (!q->n)
        q->n = nranks;
    if (q->n != nranks) {
        pthread_mutex_unlock(&q->mu);
        munmap(p, sizeof(emu_clique));
        return ncclInvalidUsage;
    }
    ncclComm *c = new ncclComm{q, {}, rank, !config || config->blocking != 0, 0, {}};
    memcpy(c->id, id.internal, sizeof c->id);
    q->joined++;
    q->live++;
    *comm = c;
    pthread_cond_broadcast(&q->cv);
    while (c->blocking && q->joined < q->n)
        pthread_cond_wait(&q->cv, &q->mu);
    bool done = q->joined == q->n;
    pthread_mutex_unlock(&q->mu);
    return done ? ncclSuccess : ncclInProgress;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error)
{
    if (!comm || !async_error)
        return ncclInvalidArgument;
    pthread_mutex_lock(&comm->q->mu);
    *async_error = in_progress(comm) ? ncclInProgress : ncclSuccess;
    pthread_mutex_unlock(&comm->q->mu);
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    size_t size = dt_size(datatype);
    if (!comm || op != ncclSum || !size)
        return ncclInvalidArgument;   /* the emulation sums float32 and float64 only */
    if (count && (!gk_emu_on_device(sendbuff, count * size) || !gk_emu_on_device(recvbuff, count * size)))
        return ncclInvalidArgument;
    gk_emu_stream_touch(stream);      /* after the stream's queued copies, as a kernel */
    emu_clique *q = comm->q;
    pthread_mutex_lock(&q->mu);
    uint64_t seq = comm->issued;
    emu_op &o = q->ops[seq % EMU_RING];
    if (q->joined < q->n || (o.used && o.seq != seq)) {
        pthread_mutex_unlock(&q->mu);
        return ncclInvalidUsage;      /* a non-blocking init must be waited for first; or too many in flight */
    }
    if (!o.used)
        o = emu_op{seq, true, false, 0, 0, count, datatype};
    bool alike = o.count == count && o.dt == datatype;
    if (!alike)
        o.broken = true;
    comm->issued++;
    comm->pending.push_back(emu_taken{seq, recvbuff});
    emu_op mine = o;
    pthread_mutex_unlock(&q->mu);
    size_t len;
    void *b = alike ? op_map(comm->id, mine, q->n, &len) : nullptr;
    if (b) {   /* this rank's part, outside the lock: no other rank writes it */
        memcpy((char *)b + (size_t)comm->rank * count * size, sendbuff, count * size);
        munmap(b, len);
    }
    pthread_mutex_lock(&q->mu);
    if (alike && (b || !count))
        o.arrived++;
    else
        o.broken = true;
    complete(q, comm->id);
    while (comm->blocking && in_progress(comm))
        pthread_cond_wait(&q->cv, &q->mu);
    bool busy = in_progress(comm);
    pthread_mutex_unlock(&q->mu);
    return busy && comm->issued == 1 ? ncclInProgress : ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    return comm ? ncclSuccess : ncclInvalidArgument;   /* nothing is in flight once polled done */
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm)
        return ncclInvalidArgument;
    emu_clique *q = comm->q;
    pthread_mutex_lock(&q->mu);
    drop(comm);
    pthread_mutex_unlock(&q->mu);
    munmap(q, sizeof(emu_clique));
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    return ncclCommDestroy(comm);
}

const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

} // extern "C"
