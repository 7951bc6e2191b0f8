/* fsutil.h — file-system chores the daemon's state and checkpoints share. */
#ifndef TRAIND_DAEMON_FSUTIL_H
#define TRAIND_DAEMON_FSUTIL_H

#include "err.h"

/* mkdir -p: every missing directory of path is created 0700 (state is private to traind);
 * fails with ERR_IO when a component cannot be made or path is not a directory. */
int fs_mkdirs(const char *path, struct err *e);

#endif
