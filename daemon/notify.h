/* notify.h — systemd's notify protocol (READY=1, STOPPING=1, WATCHDOG=1) over $NOTIFY_SOCKET, without libsystemd. */
#ifndef TRAIND_DAEMON_NOTIFY_H
#define TRAIND_DAEMON_NOTIFY_H

#include <stdint.h>

#include "err.h"

/*
 * Sends state (e.g. "READY=1") as one datagram to $NOTIFY_SOCKET: a path, or an
 * abstract socket when it starts with '@'. Without $NOTIFY_SOCKET it does nothing
 * and returns 0 (not started by systemd); otherwise 0, or an error.
 */
int notify_send(const char *state, struct err *e);

/*
 * The watchdog interval systemd asks for ($WATCHDOG_USEC, when $WATCHDOG_PID is unset,
 * this process or its parent: mpirun under traind-mpi.service), in microseconds; 0 when
 * there is none.
 */
uint64_t notify_watchdog_usec(void);

#endif
