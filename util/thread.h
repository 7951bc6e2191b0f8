/* thread.h — starting the daemon's own threads (thread_*), born deaf to the stop signals. */
#ifndef TRAIND_UTIL_THREAD_H
#define TRAIND_UTIL_THREAD_H

#include <pthread.h>

/*
 * pthread_create with SIGTERM and SIGINT blocked in the new thread from its first
 * instruction, so they reach only the thread that handles them (the loop). Returns 0 or
 * the error number of pthread_sigmask or pthread_create.
 */
int thread_start(pthread_t *t, void *(*fn)(void *), void *arg);

#endif
