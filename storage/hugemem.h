/* hugemem.h — internal to storage/: large row buffers asked to be huge pages. */
#ifndef TRAIND_STORAGE_HUGEMEM_H
#define TRAIND_STORAGE_HUGEMEM_H

#include <stddef.h>

/*
 * bytes of memory for rows, freed with free(). From 4 MiB on it is 2 MiB-aligned and
 * advised MADV_HUGEPAGE (the kernel's default "madvise" mode gives huge pages only
 * when asked): touching a fresh 75 MB batch otherwise takes ~18,000 page faults, each
 * zeroing 4 KiB, which costs as much as the training step that reads it. NULL when
 * out of memory.
 */
void *hugemem_alloc(size_t bytes);

#endif
