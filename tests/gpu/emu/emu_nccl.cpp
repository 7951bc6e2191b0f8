/* emu_nccl.cpp — the host emulation's NCCL: communicators of one process meet by unique id, and an all-reduce sums host buffers in rank order. */
#include <nccl.h>

#include "emu_cuda.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

/*
 * What comm/comm_nccl.c uses of NCCL, for the gpu-emu suite: ncclGetUniqueId,
 * ncclCommInitRankConfig (blocking or not), ncclCommGetAsyncError, ncclAllReduce (sum of
 * float32 or float64), ncclCommFinalize, ncclCommDestroy, ncclCommAbort, ncclGetErrorString.
 * The ranks of a clique are threads of this process (one emulated device each).
 *
 * A non-blocking communicator's init stays ncclInProgress until every rank has called it, and
 * an all-reduce's enqueue stays ncclInProgress until every rank has called it: the last to
 * come sums the ranks' buffers element by element in rank order, ((b0 + b1) + b2) + ..., in the
 * buffers' dtype, and writes the sum into every rank's receive buffer. So a rank that never
 * comes leaves its peers in progress for ever, as a real collective would hang; an aborted
 * communicator's pending collective never completes for its peers either. Buffers must lie
 * in live cudaMalloc blocks; the all-reduce orders after its stream's queued copies, as a
 * kernel does.
 */
/* The types have external names (nccl.h declares struct ncclComm), so not in the namespace. */

struct emu_pending {
    int arrived = 0;
    bool broken = false;    /* a rank aborted, or called it unlike the others */
    std::vector<const void *> send;
    std::vector<void *> recv;
    size_t count = 0;
    ncclDataType_t dt = ncclFloat64;
};

struct emu_clique {
    int n;
    int joined = 0;
    int live = 0;           /* communicators not yet destroyed or aborted */
    std::string id;
    uint64_t completed = 0; /* collectives done, in order */
    std::map<uint64_t, emu_pending> ops;
};

struct ncclComm {
    struct emu_clique *q;
    int rank;
    bool blocking;
    uint64_t issued;        /* collectives called */
};

namespace {

std::mutex mu;
std::condition_variable cv;
std::map<std::string, emu_clique *> cliques;
uint64_t ids;

/* With mu held: the collective seq of q, every rank come, is summed into every receive buffer. */
template <typename T> void sum_into(emu_pending &p, int n)
{
    std::vector<T> acc(p.count);
    for (size_t i = 0; i < p.count; i++)
        acc[i] = ((const T *)p.send[0])[i];
    for (int r = 1; r < n; r++)
        for (size_t i = 0; i < p.count; i++)
            acc[i] += ((const T *)p.send[r])[i];
    for (int r = 0; r < n; r++)
        memcpy(p.recv[r], acc.data(), p.count * sizeof(T));
}

/* With mu held: completes q's collectives, in order, while their ranks have all come. */
void complete(emu_clique *q)
{
    for (auto it = q->ops.find(q->completed); it != q->ops.end() && it->second.arrived == q->n &&
                                              !it->second.broken;
         it = q->ops.find(q->completed)) {
        if (it->second.dt == ncclFloat32)
            sum_into<float>(it->second, q->n);
        else
            sum_into<double>(it->second, q->n);
        q->ops.erase(it);
        q->completed++;
    }
    cv.notify_all();
}

/* With mu held: comm's communicator is gone; the clique goes with its last. */
void drop(ncclComm *comm)
{
    emu_clique *q = comm->q;
    for (auto &op : q->ops)
        if (op.first >= q->completed && comm->issued > op.first)
            op.second.broken = true;   /* its peers will never see it complete */
    if (--q->live == 0) {
        cliques.erase(q->id);
        delete q;
    }
    delete comm;
    cv.notify_all();
}

bool in_progress(const ncclComm *comm)
{
    return comm->q->joined < comm->q->n || comm->q->completed < comm->issued;
}

} // namespace

extern "C" {

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    std::lock_guard<std::mutex> g(mu);
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "emu-nccl-%llu", (unsigned long long)++ids);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config)
{
    if (!comm || nranks < 1 || rank < 0 || rank >= nranks)
        return ncclInvalidArgument;
    std::unique_lock<std::mutex> g(mu);
    std::string key(id.internal, strnlen(id.internal, sizeof id.internal));
    emu_clique *&q = cliques[key];
    if (!q) {
        q = new emu_clique;
        q->n = nranks;
        q->id = key;
    }
    if (q->n != nranks)
        return ncclInvalidUsage;
    ncclComm *c = new ncclComm{q, rank, !config || config->blocking != 0, 0};
    q->joined++;
    q->live++;
    *comm = c;
    cv.notify_all();
    if (!c->blocking)
        return q->joined < q->n ? ncclInProgress : ncclSuccess;
    cv.wait(g, [&] { return q->joined == q->n; });
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *async_error)
{
    if (!comm || !async_error)
        return ncclInvalidArgument;
    std::lock_guard<std::mutex> g(mu);
    *async_error = in_progress(comm) ? ncclInProgress : ncclSuccess;
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    size_t size = datatype == ncclFloat32 ? 4 : datatype == ncclFloat64 ? 8 : 0;
    if (!comm || op != ncclSum || !size)
        return ncclInvalidArgument;   /* the emulation sums float32 and float64 only */
    if (count && (!gk_emu_on_device(sendbuff, count * size) || !gk_emu_on_device(recvbuff, count * size)))
        return ncclInvalidArgument;
    gk_emu_stream_touch(stream);      /* after the stream's queued copies, as a kernel */
    std::unique_lock<std::mutex> g(mu);
    emu_clique *q = comm->q;
    if (q->joined < q->n)
        return ncclInvalidUsage;      /* a non-blocking init must be waited for first */
    uint64_t seq = comm->issued++;
    emu_pending &p = q->ops[seq];
    if (p.arrived == 0) {
        p.send.assign((size_t)q->n, nullptr);
        p.recv.assign((size_t)q->n, nullptr);
        p.count = count;
        p.dt = datatype;
    } else if (p.count != count || p.dt != datatype) {
        p.broken = true;
    }
    p.send[(size_t)comm->rank] = sendbuff;
    p.recv[(size_t)comm->rank] = recvbuff;
    p.arrived++;
    complete(q);
    if (!comm->blocking)
        return in_progress(comm) ? ncclInProgress : ncclSuccess;
    cv.wait(g, [&] { return q->completed > seq; });
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    return comm ? ncclSuccess : ncclInvalidArgument;   /* nothing is in flight once polled done */
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    if (!comm)
        return ncclInvalidArgument;
    std::lock_guard<std::mutex> g(mu);
    drop(comm);
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
