/* beneath.h — internal to storage/: opening a file that must stay below a data root while it is opened. */
#ifndef TRAIND_STORAGE_BENEATH_H
#define TRAIND_STORAGE_BENEATH_H

/*
 * Opens path (absolute, below root) for reading, resolved from root's directory
 * descriptor so that no component may lead out of root: openat2 with
 * RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS, or, where the kernel has no openat2, a
 * walk one component at a time that follows no symlink at all. A descriptor, or -1
 * with errno set: EXDEV or ELOOP when the path now leads out, ENOENT when it is gone.
 */
int beneath_open(const char *root, const char *path);

/* The walk beneath_open falls back to; exposed so that tests run it on kernels that have openat2. */
int beneath_walk(int rootfd, const char *rel);

#endif
