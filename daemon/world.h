/*
 * world.h — traind under mpirun (world_*): rank 0 leads (HTTP, state dir, scheduler), every
 * other rank follows: it reports its host, CPU workers, GPUs and whether NCCL loads there, and
 * runs the replicas rank 0 places on them. The control messages between them are JSON over
 * comm/'s MPI layer.
 *
 *   follower -> 0  {"hello": {"host", "cpu_workers", "gpus": [GET /devices' gpus], "nccl"}}  once
 *   0 -> follower  {"run": {"tag", "rank", "index", "total", "offset", "local", "procs", "me",
 *                           "job_id", "spec", "resume", "init", ["nccl_id"]}}  one per replica
 *                  [the checkpoint's bytes] [init.from's bytes]           after a run's first
 *   follower -> 0  {"stats": {"tag", "replicas": [{"rank", "iterations", ...}]}}  every second
 *   follower -> 0  {"done": {"tag", "rank", "code", "message"}}            one per replica
 *   0 -> follower  {"exit": {}}                                           at the end
 *
 * A follower's workers are its CPU workers ("index" 0 .. cpu_workers - 1), then its GPUs that
 * --gpus uses, in the hello's order. A run of GPU replicas carries "nccl_id", the NCCL unique id
 * (its 128 bytes as numbers) that rank 0 made for the job's communicator of every rank's GPUs.
 * A job's replica 0 always runs on rank 0, which alone writes its metrics and checkpoints; a
 * follower's replicas read the data themselves (the same URLs, so file:// data must be at the
 * same path on every box) and resume from the checkpoint rank 0 sends them.
 */
#ifndef TRAIND_DAEMON_WORLD_H
#define TRAIND_DAEMON_WORLD_H

#include <jansson.h>

#include "comm_mpi.h"
#include "err.h"
#include "scheduler.h"
#include "worker.h"

struct world;

/* A follower's devices, as its hello said. */
struct world_rank {
    int rank;
    char host[256];
    int cpu_workers;
    json_t *gpus;                 /* as GET /devices lists them, named rankR/cuda:K; NULL on rank 0 */
    bool nccl;                    /* NCCL loads there: its GPUs may take replicas */
};

/*
 * Rank 0: waits (at most timeout_ms) for every follower's hello and starts the thread that
 * takes their reports. mpi NULL (traind alone): a world of one rank.
 */
int world_lead(struct comm_mpi *mpi, int cpu_workers, int64_t timeout_ms, struct world **out, struct err *e);
int world_size(const struct world *w);
const struct world_rank *world_rank_info(const struct world *w, int rank);

/* How the scheduler reaches the followers' workers (worker_start_remote). */
struct worker_remote world_remote(struct world *w);

/*
 * Rank 0's part of the replicas of a job placed on workers (workers[r] runs replica r;
 * replica 0 on rank 0, each rank's replicas contiguous): a train_world whose all-reduce also
 * spans the other ranks, waiting for them at most allreduce_timeout_s. Forgotten with world_run_end when the scheduler frees it.
 */
int world_replicas(struct world *w, struct worker *const *workers, int n, double allreduce_timeout_s,
                   struct train_world **out, struct err *e);
void world_run_end(struct world *w, const struct train_world *tw);

/*
 * {"rank", "host", "cpu_workers", "gpus", "nccl"} for every rank: what GET /devices adds under
 * mpirun; rank 0's gpus are own_gpus (a copy is taken).
 */
json_t *world_ranks_json(const struct world *w, json_t *own_gpus);

/* Rank 0, at the end: no more reports (call before the scheduler closes); then the followers exit. */
void world_quiet(struct world *w);
void world_end(struct world *w);

/*
 * A follower's whole life: hello, then run what rank 0 sends on cfg->cpu_workers workers of its
 * own and one a GPU of cfg->devices that it uses, until it says exit. Returns 0, or 1 when it could not reach rank 0.
 */
int world_follow(struct comm_mpi *mpi, const struct sched_config *cfg);

#endif
