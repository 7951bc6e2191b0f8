/* world_impl.h — daemon-internal: what world.c (rank 0) and world_follow.c (the others) share. */
#ifndef TRAIND_DAEMON_WORLD_IMPL_H
#define TRAIND_DAEMON_WORLD_IMPL_H

#include <stdint.h>

#include <jansson.h>

#include "comm_mpi.h"
#include "err.h"
#include "scheduler.h"

/* How long a control message may take to go; a follower's hello may take longer (it starts). */
#define WORLD_SEND_MS 30000

/* How long a replica waits in an all-reduce for the other ranks: --allreduce-timeout's seconds. */
static inline int64_t world_span_ms(double allreduce_timeout_s)
{
    return (int64_t)((allreduce_timeout_s > 0 ? allreduce_timeout_s : SCHED_ALLREDUCE_TIMEOUT_S) * 1000);
}

/* Sends o (a JSON message, consumed) to rank `to`. */
int world_send_json(struct comm_mpi *mpi, int to, json_t *o, struct err *e);

/* The next message, at most wait_ms away: *kind its one key and *body its value; NULL when none came. */
json_t *world_recv_json(struct comm_mpi *mpi, int64_t wait_ms, int *from, const char **kind, json_t **body,
                        struct err *e);

/* The whole of the file open at fd (from its start), malloc'd. */
int world_read_fd(int fd, char **out, size_t *len, struct err *e);

#endif
