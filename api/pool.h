/* pool.h — a few threads for work the loop thread must not do (api_pool_*): run there, finished on the loop. */
#ifndef TRAIND_API_POOL_H
#define TRAIND_API_POOL_H

#include <stdbool.h>

#include <uv.h>

#include "err.h"

struct api_pool;

/* Embed one in the work; recover the work from it in the callbacks. */
struct api_pool_item {
    void (*run)(struct api_pool_item *it);             /* on a pool thread */
    void (*done)(struct api_pool_item *it, bool ran);  /* on the loop thread; ran false: the pool
                                                          closed before run was called */
    struct api_pool_item *next;                        /* the pool's */
};

/* threads threads, born with SIGTERM and SIGINT blocked, and a doorbell on loop. */
int api_pool_start(uv_loop_t *loop, int threads, struct api_pool **out, struct err *e);

/* Loop thread. it->run runs on the first free thread, in submission order; then it->done. */
void api_pool_submit(struct api_pool *p, struct api_pool_item *it);

/*
 * Loop thread. Waits for the items running to finish, calls done for every item (ran false
 * for those never run), and closes the doorbell; free once the loop ran.
 */
void api_pool_close(struct api_pool *p);
void api_pool_free(struct api_pool *p);

#endif
