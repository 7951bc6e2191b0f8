/* hugemem.c — large row buffers asked to be huge pages. */
#include "hugemem.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

void *hugemem_alloc(size_t bytes)
{
    const size_t huge = (size_t)2 << 20;
    if (bytes < 2 * huge)
        return malloc(bytes ? bytes : 1);
    if (bytes > SIZE_MAX - huge)
        return NULL;
    void *p = NULL;
    if (posix_memalign(&p, huge, bytes) != 0)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, bytes / huge * huge, MADV_HUGEPAGE); /* advice only: else plain pages */
#endif
    return p;
}
