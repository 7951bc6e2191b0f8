/* buf.h — a growing byte buffer kept NUL-terminated: request bodies, downloads, JSON and metrics text. */
#ifndef TRAIND_UTIL_BUF_H
#define TRAIND_UTIL_BUF_H

#include <stddef.h>

/*
 * The buffer is three fields of the caller's struct: *p (NULL when empty), *len and *cap.
 * Capacity doubles from 4096 bytes, so appending a body piece by piece costs O(total).
 */

/* Makes *cap at least need, reallocating *p; 0, or -1 (nothing changed) when out of memory. */
int buf_reserve(char **p, size_t *cap, size_t need);

/* Appends the n bytes at s and a NUL after them; 0, or -1 (nothing changed) when out of memory. */
int buf_append(char **p, size_t *len, size_t *cap, const char *s, size_t n);

#endif
