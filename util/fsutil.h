/* fsutil.h — file-system chores: directories for state and checkpoints. */
#ifndef TRAIND_UTIL_FSUTIL_H
#define TRAIND_UTIL_FSUTIL_H

#include "err.h"

/* mkdir -p: every missing directory of path is created 0700 (state is private to traind);
 * fails with ERR_IO when a component cannot be made or path is not a directory. */
int fs_mkdirs(const char *path, struct err *e);

#endif
