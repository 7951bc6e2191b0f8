/* buf.c — a growing byte buffer kept NUL-terminated. */
#include "buf.h"

#include <stdlib.h>
#include <string.h>

int buf_reserve(char **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 4096;
    while (c < need) {
        if (c > (size_t)-1 / 2)
            return -1;
        c *= 2;
    }
    char *q = realloc(*p, c);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

int buf_append(char **p, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (n > (size_t)-1 - *len - 1 || buf_reserve(p, cap, *len + n + 1))
        return -1;
    if (n)
        memcpy(*p + *len, s, n);
    *len += n;
    (*p)[*len] = '\0';
    return 0;
}
