/* job_queue.c — per-priority lists of queued jobs and a bitmap of the non-empty ones. */
#include "job_queue.h"

void jq_init(struct job_queue *q)
{
    for (int i = 0; i < JQ_LEVELS; i++)
        q->head[i].prev = q->head[i].next = &q->head[i];
    for (size_t w = 0; w < sizeof q->used / sizeof *q->used; w++)
        q->used[w] = 0;
    q->arrivals.older = q->arrivals.newer = &q->arrivals;
    q->gen = 0;
    q->n = 0;
}

bool jq_queued(const struct jq_node *x)
{
    return x->prev != NULL;
}

void jq_insert(struct job_queue *q, struct jq_node *x, int priority, uint64_t seq)
{
    if (jq_queued(x))
        return;
    if (priority < SPEC_PRIORITY_MIN)
        priority = SPEC_PRIORITY_MIN;
    if (priority > SPEC_PRIORITY_MAX)
        priority = SPEC_PRIORITY_MAX;
    x->level = SPEC_PRIORITY_MAX - priority;
    x->seq = seq;
    struct jq_node *h = &q->head[x->level], *after = h->prev;
    while (after != h && after->seq > seq)   /* from the tail: a new job stops at once */
        after = after->prev;
    x->prev = after;
    x->next = after->next;
    after->next->prev = x;
    after->next = x;
    q->used[x->level / 64] |= UINT64_C(1) << (x->level % 64);
    x->gen = ++q->gen;
    x->older = q->arrivals.older;
    x->newer = &q->arrivals;
    q->arrivals.older->newer = x;
    q->arrivals.older = x;
    q->n++;
}

void jq_remove(struct job_queue *q, struct jq_node *x)
{
    if (!jq_queued(x))
        return;
    x->prev->next = x->next;
    x->next->prev = x->prev;
    struct jq_node *h = &q->head[x->level];
    if (h->next == h)
        q->used[x->level / 64] &= ~(UINT64_C(1) << (x->level % 64));
    x->older->newer = x->newer;
    x->newer->older = x->older;
    x->prev = x->next = x->older = x->newer = NULL;
    q->n--;
}

/* The first non-empty level at or after level, or JQ_LEVELS. */
static int level_from(const struct job_queue *q, int level)
{
    size_t words = sizeof q->used / sizeof *q->used;
    for (size_t w = (size_t)level / 64; level < JQ_LEVELS && w < words; w++) {
        uint64_t bits = q->used[w];
        if (w == (size_t)level / 64)
            bits &= ~UINT64_C(0) << (level % 64);
        if (bits)
            return (int)(w * 64) + __builtin_ctzll(bits);
    }
    return JQ_LEVELS;
}

struct jq_node *jq_first(const struct job_queue *q)
{
    int l = level_from(q, 0);
    return l < JQ_LEVELS ? q->head[l].next : NULL;
}

struct jq_node *jq_next(const struct job_queue *q, const struct jq_node *x)
{
    if (x->next != &q->head[x->level])
        return x->next;
    int l = level_from(q, x->level + 1);
    return l < JQ_LEVELS ? q->head[l].next : NULL;
}

struct jq_node *jq_entered_after(const struct job_queue *q, uint64_t gen)
{
    struct jq_node *x = q->arrivals.older;
    return x != &q->arrivals && x->gen > gen ? x : NULL;
}

struct jq_node *jq_entered_before(const struct job_queue *q, const struct jq_node *x, uint64_t gen)
{
    return x->older != &q->arrivals && x->older->gen > gen ? x->older : NULL;
}
