/* emu_runtime.cpp — the host emulation's CUDA runtime: device memory is checked host memory, streams run adversarially. */
#include "emu_cuda.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <vector>

/*
 * Calls complete before they return, but for host-to-device copies on a stream: those
 * wait in their stream's queue, as a DMA engine's would, until something orders them:
 * any later operation on the same stream (kernels, cuBLAS, copies, memsets), a
 * synchronize of the stream, or a wait for an event recorded after them (a stream's
 * cudaStreamWaitEvent, cudaEventSynchronize, or a cudaEventQuery, whose first answer is
 * cudaErrorNotReady). So a kernel on another stream that reads a buffer without waiting
 * for its copy sees the old contents, host memory changed before the copy's event
 * completed is what gets copied, and freeing host memory a queued copy reads aborts.
 *
 * A copy also runs ahead of every operation on another stream that nothing orders before
 * it, as a GPU's copy engine may: where a memset or a copy of such an operation wrote the
 * copy's destination, those bytes keep what that write left, as if the copy had landed
 * first and been overwritten. "Ordered before" is the happens-before of CUDA: an event
 * recorded after the operation and waited for by the copy's stream before the copy was
 * queued (directly or through other events), or the host's wait for the operation
 * (a stream or event synchronize, an event query that said done, a cudaFree). Kernels
 * and GEMMs are not followed byte by byte: only memsets and copies are written down.
 *
 * Devices: one, or TRAIND_EMU_DEVICES=N (1 to 8) in the environment, for replicas on
 * several GPUs; they share one memory, which each rank's buffers split between them as
 * separate cudaMallocs. Kernels launched from several threads (one a device) run one at a
 * time, as the block emulation's shared statics and thread pool require.
 *
 * Every device
 * pointer a copy, memset or GEMM touches must lie inside one live cudaMalloc block,
 * so layout mistakes fail here as they would fault on a GPU. The emulated device
 * has EMU_MEMORY bytes, so an impossible request fails with cudaErrorMemoryAllocation.
 *
 * A device fault: with TRAIND_EMU_FAULT_AFTER_LAUNCHES=N in the environment, the kernel
 * launched after the first N "faults" as an illegal address would, and the context is
 * lost as CUDA's is: the error is sticky, cudaGetLastError returns it without clearing
 * it, and every later call fails with it (frees still release the host memory behind
 * them, so the test process leaks nothing, but report the error as CUDA does).
 */
#define EMU_MEMORY ((size_t)8 << 30)

thread_local uint3 threadIdx, blockIdx;
thread_local dim3 blockDim, gridDim;

namespace {

std::mutex mu;
std::map<const char *, size_t> blocks;   /* live device allocations */
size_t in_use;
thread_local cudaError_t last_error = cudaSuccess;
thread_local int current_device = 0;
std::atomic<cudaError_t> lost{cudaSuccess};   /* sticky: the context is gone */
std::atomic<long> launches{0};

/* TRAIND_EMU_DEVICES, 1 when unset or not in 1..8. */
int emu_devices(void)
{
    const char *v = getenv("TRAIND_EMU_DEVICES");
    int n = v ? atoi(v) : 1;
    return n >= 1 && n <= 8 ? n : 1;
}

long fault_after(void)
{
    static const long n = [] {
        const char *v = getenv("TRAIND_EMU_FAULT_AFTER_LAUNCHES");
        return v && *v ? strtol(v, nullptr, 10) : -1L;
    }();
    return n;
}

cudaError_t fail(cudaError_t rc)
{
    last_error = rc;
    return rc;
}

#define LOST_GUARD()                                \
    do {                                            \
        if (cudaError_t l_ = lost.load())           \
            return fail(l_);                        \
    } while (0)

/* What a release in a lost context reports, after releasing all the same. */
cudaError_t released(void)
{
    cudaError_t l = lost.load();
    return l ? fail(l) : cudaSuccess;
}

/* Is [p, p + bytes) inside one live device block? */
bool on_device(const void *p, size_t bytes)
{
    std::lock_guard<std::mutex> g(mu);
    const char *c = (const char *)p;
    auto it = blocks.upper_bound(c);
    if (it == blocks.begin())
        return false;
    --it;
    return c >= it->first && c + bytes <= it->first + it->second;
}

/* ---- streams whose host-to-device copies wait until something orders them ---- */

/* For each stream (by id), how many of its operations are known to have finished before. */
using clock_map = std::map<uint64_t, uint64_t>;

struct pending_copy {
    void *dst;
    const void *src;
    size_t bytes;
    uint64_t seq;
    uint64_t op;                /* its operation number on its stream */
    clock_map after;            /* the other streams' operations ordered before it */
};

/* A range a memset or a copy wrote, by operation number on its stream. */
struct written {
    const char *p;
    size_t bytes;
    uint64_t op;
};

/* The writes a stream remembers for the copies of other streams to run ahead of. */
#define EMU_WRITES_KEPT 4096

struct emu_stream {
    std::deque<pending_copy> q;
    uint64_t issued = 0;        /* copies queued on the stream so far */
    uint64_t id = 0;            /* never reused, unlike the address */
    uint64_t ops = 0;           /* operations issued on the stream so far */
    clock_map after;            /* the other streams' operations every later one here follows */
    std::deque<written> w;      /* the latest ranges its memsets and copies wrote */
};

struct emu_event {
    double ms = 0;              /* when recorded, for cudaEventElapsedTime */
    emu_stream *s = nullptr;    /* recorded on, after its copy number seq */
    uint64_t seq = 0;
    uint64_t op = 0;            /* and after its operation number op */
    clock_map after;            /* what that stream had waited for then */
    bool told_not_ready = false;
};

std::recursive_mutex streams_mu;
std::set<emu_stream *> streams;
std::map<const char *, size_t> host_blocks;   /* live cudaHostAlloc blocks */

uint64_t next_stream_id;
clock_map host_after;   /* what the host has waited for: every operation queued later follows it */

void merge(clock_map &into, const clock_map &from)
{
    for (const auto &kv : from)
        if (into[kv.first] < kv.second)
            into[kv.first] = kv.second;
}

uint64_t seen(const clock_map &m, uint64_t id)
{
    auto it = m.find(id);
    return it == m.end() ? 0 : it->second;
}

bool live(emu_stream *s)
{
    return s && streams.count(s);
}

/* A new operation on s: it follows what the host has waited for. Its number (0: no stream). */
uint64_t issue_op(emu_stream *s)
{
    std::lock_guard<std::recursive_mutex> g(streams_mu);
    if (!live(s))
        return 0;
    merge(s->after, host_after);
    return ++s->ops;
}

void note_write(emu_stream *s, const void *p, size_t bytes, uint64_t op)
{
    std::lock_guard<std::recursive_mutex> g(streams_mu);
    if (!live(s) || bytes == 0)
        return;
    s->w.push_back({(const char *)p, bytes, op});
    if (s->w.size() > EMU_WRITES_KEPT)
        s->w.pop_front();
}

/* The host waited for s's operations up to op, and so for everything they followed. */
void host_waited(emu_stream *s, uint64_t op, const clock_map &also)
{
    std::lock_guard<std::recursive_mutex> g(streams_mu);
    merge(host_after, also);
    if (live(s) && host_after[s->id] < op)
        host_after[s->id] = op;
}

/* After a device-wide wait: every stream's writes precede whatever is queued later. */
void forget_writes(void)
{
    std::lock_guard<std::recursive_mutex> g(streams_mu);
    for (emu_stream *t : streams) {
        t->w.clear();
        host_waited(t, t->ops, t->after);
    }
}

/* Lands copy c of stream s, ahead of the other streams' writes that do not precede it:
 * bytes they wrote keep their value. */
void land(emu_stream *s, const pending_copy &c)
{
    std::vector<std::pair<size_t, size_t>> keep;   /* [from, to) offsets into dst */
    const char *lo = (const char *)c.dst, *hi = lo + c.bytes;
    for (emu_stream *t : streams) {
        if (t == s)
            continue;
        uint64_t before = seen(c.after, t->id);
        for (const written &w : t->w)
            if (w.op > before && w.p < hi && lo < w.p + w.bytes)
                keep.push_back({(size_t)((w.p > lo ? w.p : lo) - lo),
                                (size_t)((w.p + w.bytes < hi ? w.p + w.bytes : hi) - lo)});
    }
    std::sort(keep.begin(), keep.end());
    size_t at = 0;
    for (const auto &k : keep) {
        if (k.first > at)
            memmove((char *)c.dst + at, (const char *)c.src + at, k.first - at);
        if (k.second > at)
            at = k.second;
    }
    if (at < c.bytes)
        memmove((char *)c.dst + at, (const char *)c.src + at, c.bytes - at);
    note_write(s, c.dst, c.bytes, c.op);
}

/* Performs s's queued copies up to number seq (all with UINT64_MAX). */
void run_copies(emu_stream *s, uint64_t seq)
{
    std::lock_guard<std::recursive_mutex> g(streams_mu);
    if (!live(s))
        return;
    while (!s->q.empty() && s->q.front().seq <= seq) {
        pending_copy c = s->q.front();
        s->q.pop_front();
        land(s, c);
    }
}

/* An operation on s (a kernel, a GEMM): after s's queued copies, and numbered. */
uint64_t stream_op(emu_stream *s)
{
    run_copies(s, UINT64_MAX);
    return issue_op(s);
}

/* Has everything before ev completed? */
bool event_done(const emu_event *ev)
{
    std::lock_guard<std::recursive_mutex> g(streams_mu);
    return !ev->s || !streams.count(ev->s) || ev->s->q.empty() || ev->s->q.front().seq > ev->seq;
}

/* Aborts when [p, p + bytes) is read or written by a queued copy: a DMA would still be running. */
void check_not_in_flight(const void *p, size_t bytes, const char *what)
{
    std::lock_guard<std::recursive_mutex> g(streams_mu);
    const char *lo = (const char *)p, *hi = lo + bytes;
    for (emu_stream *s : streams)
        for (const pending_copy &c : s->q) {
            const char *src = (const char *)c.src, *dst = (const char *)c.dst;
            if ((src < hi && lo < src + c.bytes) || (dst < hi && lo < dst + c.bytes)) {
                fprintf(stderr, "emu: %s of memory that a queued host-to-device copy still uses\n", what);
                abort();
            }
        }
}

/* ---- threads of a block that meet at __syncthreads ---- */

struct block_pool {
    unsigned n = 0;
    pthread_t *th = nullptr;
    pthread_barrier_t start, end, sync;
    const std::function<void()> *body = nullptr;
    uint3 block;
    dim3 grid, bdim;
};
block_pool pool;
thread_local bool in_pool = false;

void *pool_worker(void *arg)
{
    unsigned i = (unsigned)(uintptr_t)arg;
    in_pool = true;
    for (;;) {
        pthread_barrier_wait(&pool.start);
        threadIdx = {i % pool.bdim.x, (i / pool.bdim.x) % pool.bdim.y, i / (pool.bdim.x * pool.bdim.y)};
        blockIdx = pool.block;
        gridDim = pool.grid;
        blockDim = pool.bdim;
        (*pool.body)();
        pthread_barrier_wait(&pool.end);
    }
    return nullptr;
}

void pool_start(unsigned n)
{
    if (pool.n == n)
        return;
    if (pool.n != 0) {
        fprintf(stderr, "emu: block size changed from %u to %u threads\n", pool.n, n);
        abort();
    }
    pool.n = n;
    pool.th = (pthread_t *)calloc(n, sizeof *pool.th);
    pthread_barrier_init(&pool.start, nullptr, n + 1);
    pthread_barrier_init(&pool.end, nullptr, n + 1);
    pthread_barrier_init(&pool.sync, nullptr, n);
    for (unsigned i = 0; i < n; i++)
        if (pthread_create(&pool.th[i], nullptr, pool_worker, (void *)(uintptr_t)i))
            abort();
}

} // namespace

void __syncthreads(void)
{
    if (!in_pool) {
        fprintf(stderr, "emu: __syncthreads in a kernel launched with GK_LAUNCH, not GK_LAUNCH_SYNC\n");
        abort();
    }
    pthread_barrier_wait(&pool.sync);
}

void gk_emu_stream_touch(cudaStream_t s)
{
    stream_op((emu_stream *)s);
}

bool gk_emu_on_device(const void *p, size_t bytes)
{
    return on_device(p, bytes);
}

bool gk_emu_lost(void)
{
    return lost.load() != cudaSuccess;
}

static std::mutex launch_mu;   /* one launch at a time, whichever thread (device) it comes from */

void gk_emu_launch(dim3 grid, dim3 block, bool threaded, const std::function<void()> &body)
{
    std::lock_guard<std::mutex> g(launch_mu);
    long after = fault_after();
    if (after >= 0 && ++launches > after)
        lost = cudaErrorIllegalAddress;
    if (lost.load()) {   /* a fault runs nothing; the launch itself reports nothing, as on a GPU */
        last_error = lost.load();
        return;
    }
    if (block.x * block.y * block.z > 1024 || grid.y > 65535 || grid.z > 65535) {
        last_error = cudaErrorInvalidConfiguration;
        return;
    }
    unsigned nt = block.x * block.y * block.z;
    if (threaded) {
        pool_start(nt);
        pool.body = &body;
        pool.grid = grid;
        pool.bdim = block;
    }
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                if (threaded) {
                    pool.block = {x, y, z};
                    pthread_barrier_wait(&pool.start);
                    pthread_barrier_wait(&pool.end);
                    continue;
                }
                blockIdx = {x, y, z};
                gridDim = grid;
                blockDim = block;
                for (unsigned t = 0; t < nt; t++) {
                    threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                    body();
                }
            }
}

extern "C" {

/* ---- devices ---- */

cudaError_t cudaGetDeviceCount(int *n)
{
    *n = emu_devices();
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int d)
{
    if (d < 0 || d >= emu_devices())
        return fail(cudaErrorInvalidDevice);
    current_device = d;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *d)
{
    *d = current_device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *p, int d)
{
    if (d < 0 || d >= emu_devices())
        return fail(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "traind host emulation");
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 1;
    p->totalGlobalMem = EMU_MEMORY;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr attr, int d)
{
    if (d < 0 || d >= emu_devices())
        return fail(cudaErrorInvalidDevice);
    *v = attr == cudaDevAttrComputeCapabilityMajor ? 9 : 0;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *id, int len, int d)
{
    if (d < 0 || d >= emu_devices())
        return fail(cudaErrorInvalidDevice);
    snprintf(id, (size_t)len, "0000:%02x:00.0", d);
    return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int *v)
{
    *v = 13000;
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = 13000;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
    if (cudaError_t l = lost.load())
        return l;
    cudaError_t rc = last_error;
    last_error = cudaSuccess;
    return rc;
}

const char *cudaGetErrorString(cudaError_t rc)
{
    switch (rc) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    default: return "emulated CUDA error";
    }
}

const char *cudaGetErrorName(cudaError_t rc)
{
    switch (rc) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    default: return "cudaErrorUnknown";
    }
}

/* ---- memory ---- */

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    LOST_GUARD();
    std::lock_guard<std::mutex> g(mu);
    *p = nullptr;
    if (bytes > EMU_MEMORY - in_use)
        return fail(cudaErrorMemoryAllocation);
    char *c = (char *)malloc(bytes ? bytes : 1);
    if (!c)
        return fail(cudaErrorMemoryAllocation);
    blocks[c] = bytes;
    in_use += bytes;
    *p = c;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    if (!p)
        return cudaSuccess;
    std::lock_guard<std::mutex> g(mu);
    auto it = blocks.find((const char *)p);
    if (it == blocks.end())
        return fail(cudaErrorInvalidValue);
    check_not_in_flight(p, it->second, "cudaFree");
    forget_writes();   /* cudaFree waits for the device: nothing before it can run late */
    in_use -= it->second;
    blocks.erase(it);
    free(p);
    return released();
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total)
{
    LOST_GUARD();
    std::lock_guard<std::mutex> g(mu);
    *free_b = EMU_MEMORY - in_use;
    *total = EMU_MEMORY;
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int flags)
{
    LOST_GUARD();
    *p = malloc(bytes ? bytes : 1);
    if (!*p)
        return fail(cudaErrorMemoryAllocation);
    std::lock_guard<std::recursive_mutex> g(streams_mu);
    host_blocks[(const char *)*p] = bytes;
    return cudaSuccess;
}

cudaError_t cudaFreeHost(void *p)
{
    if (!p)
        return cudaSuccess;
    {
        std::lock_guard<std::recursive_mutex> g(streams_mu);
        auto it = host_blocks.find((const char *)p);
        if (it == host_blocks.end())
            return fail(cudaErrorInvalidValue);
        check_not_in_flight(p, it->second, "cudaFreeHost");
        host_blocks.erase(it);
    }
    free(p);
    return released();
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind,
                            cudaStream_t s)
{
    LOST_GUARD();
    bool ok = kind == cudaMemcpyHostToDevice   ? on_device(dst, bytes)
              : kind == cudaMemcpyDeviceToHost ? on_device(src, bytes)
              : kind == cudaMemcpyDeviceToDevice ? on_device(dst, bytes) && on_device(src, bytes)
                                                 : false;
    if (!ok)
        return fail(cudaErrorInvalidValue);
    emu_stream *es = (emu_stream *)s;
    uint64_t op = stream_op(es);   /* in order after the stream's earlier work */
    std::lock_guard<std::recursive_mutex> g(streams_mu);
    if (live(es) && kind == cudaMemcpyHostToDevice) {
        es->q.push_back({dst, src, bytes, ++es->issued, op, es->after});
        return cudaSuccess;
    }
    if (bytes)
        memmove(dst, src, bytes);
    if (kind != cudaMemcpyDeviceToHost)
        note_write(es, dst, bytes, op);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t bytes, cudaStream_t s)
{
    LOST_GUARD();
    uint64_t op = stream_op((emu_stream *)s);
    if (!on_device(p, bytes))
        return fail(cudaErrorInvalidValue);
    memset(p, v, bytes);
    note_write((emu_stream *)s, p, bytes, op);
    return cudaSuccess;
}

/* ---- streams and events (see the top of the file) ---- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    LOST_GUARD();
    emu_stream *es = new emu_stream;
    std::lock_guard<std::recursive_mutex> g(streams_mu);
    es->id = ++next_stream_id;
    streams.insert(es);
    *s = (cudaStream_t)es;
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    emu_stream *es = (emu_stream *)s;
    run_copies(es, UINT64_MAX);   /* CUDA finishes a destroyed stream's work */
    std::lock_guard<std::recursive_mutex> g(streams_mu);
    streams.erase(es);
    delete es;
    return released();
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    LOST_GUARD();
    emu_stream *es = (emu_stream *)s;
    run_copies(es, UINT64_MAX);
    std::lock_guard<std::recursive_mutex> g(streams_mu);
    if (live(es))
        host_waited(es, es->ops, es->after);
    return cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t ev, unsigned int flags)
{
    LOST_GUARD();
    if (!ev)
        return fail(cudaErrorInvalidValue);
    emu_event *ee = (emu_event *)ev;
    emu_stream *es = (emu_stream *)s;
    run_copies(es, UINT64_MAX);
    run_copies(ee->s, ee->seq);
    std::lock_guard<std::recursive_mutex> g(streams_mu);
    if (live(es) && live(ee->s) && ee->s != es) {   /* es's later operations follow ee's */
        merge(es->after, ee->after);
        if (es->after[ee->s->id] < ee->op)
            es->after[ee->s->id] = ee->op;
    }
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned int flags)
{
    LOST_GUARD();
    *ev = (cudaEvent_t) new emu_event;
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *ev)
{
    return cudaEventCreateWithFlags(ev, 0);
}

cudaError_t cudaEventDestroy(cudaEvent_t ev)
{
    delete (emu_event *)ev;
    return released();
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s)
{
    LOST_GUARD();
    emu_event *ee = (emu_event *)ev;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ee->ms = (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
    std::lock_guard<std::recursive_mutex> g(streams_mu);
    ee->s = (emu_stream *)s;
    bool on = live(ee->s);
    ee->seq = on ? ee->s->issued : 0;
    ee->op = on ? ee->s->ops : 0;
    ee->after = on ? ee->s->after : clock_map();
    ee->told_not_ready = false;
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t ev)
{
    LOST_GUARD();
    emu_event *ee = (emu_event *)ev;
    run_copies(ee->s, ee->seq);
    host_waited(ee->s, ee->op, ee->after);
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t ev)
{
    LOST_GUARD();
    emu_event *ee = (emu_event *)ev;
    if (!event_done(ee) && !ee->told_not_ready) {   /* callers must poll: the copy is "still running" once */
        ee->told_not_ready = true;
        return fail(cudaErrorNotReady);
    }
    run_copies(ee->s, ee->seq);
    host_waited(ee->s, ee->op, ee->after);
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    LOST_GUARD();
    *ms = (float)(((emu_event *)b)->ms - ((emu_event *)a)->ms);
    if (*ms <= 0)
        *ms = 1e-6f;
    return cudaSuccess;
}

} // extern "C"
