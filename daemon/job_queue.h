/* job_queue.h — the queued jobs in the order they run (jq_*): one list a priority, each by submission. */
#ifndef TRAIND_DAEMON_JOB_QUEUE_H
#define TRAIND_DAEMON_JOB_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spec.h"

#define JQ_LEVELS (SPEC_PRIORITY_MAX - SPEC_PRIORITY_MIN + 1)

/* Embedded in what is queued; prev is NULL while it is not. */
struct jq_node {
    struct jq_node *prev, *next;      /* its priority's list, by seq */
    struct jq_node *older, *newer;    /* every queued node, in the order they entered */
    uint64_t seq;       /* submission order: lower is older */
    uint64_t gen;       /* when it entered the queue: 1, 2, ... */
    int level;          /* 0: the highest priority */
};

/*
 * The first node is the highest priority's oldest: O(1) through a bitmap of the non-empty
 * levels. A new submission is appended in O(1); a job queued again (resumed, requeued) goes
 * back to its submission place, found from its level's tail.
 */
struct job_queue {
    struct jq_node head[JQ_LEVELS];
    uint64_t used[(JQ_LEVELS + 63) / 64];
    struct jq_node arrivals;          /* newer: the oldest entry; older: the newest */
    uint64_t gen;                     /* entries so far */
    size_t n;
};

void jq_init(struct job_queue *q);
/* Queues x (not queued) at priority (clamped to the spec's range) and submission seq. */
void jq_insert(struct job_queue *q, struct jq_node *x, int priority, uint64_t seq);
/* Takes x out; nothing when it is not queued. */
void jq_remove(struct job_queue *q, struct jq_node *x);
bool jq_queued(const struct jq_node *x);
/* The node that runs first, and the one after x in that order; NULL past the end. */
struct jq_node *jq_first(const struct job_queue *q);
struct jq_node *jq_next(const struct job_queue *q, const struct jq_node *x);
/* The queued nodes that entered after generation gen, newest first; NULL when there are no more. */
struct jq_node *jq_entered_after(const struct job_queue *q, uint64_t gen);
struct jq_node *jq_entered_before(const struct job_queue *q, const struct jq_node *x, uint64_t gen);

#endif
