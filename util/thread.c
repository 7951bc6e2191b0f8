/* thread.c — a thread inherits its creator's signal mask: block, create, restore. */
#include "thread.h"

#include <signal.h>

int thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    int rc = pthread_sigmask(SIG_BLOCK, &block, &old);
    if (rc)
        return rc;
    rc = pthread_create(t, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}
