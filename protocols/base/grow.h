/* grow.h — room for one more element at the end of a growing array. */
#ifndef MPCSIM_GROW_H
#define MPCSIM_GROW_H

#include <stdlib.h>
#include <string.h>

/* *arr (a pointer to the array's pointer) holds n of *cap elements of elem bytes; when it is
 * full, doubles *cap (from first when 0) and reallocates. 0, or -1 on OOM with the array and
 * *cap unchanged. The pointer is moved with memcpy, so any element type's pointer may be
 * passed. */
static inline int ms_grow(void *arr, size_t *cap, size_t n, size_t elem, size_t first)
{
    if (n < *cap)
        return 0;
    void *p;
    memcpy(&p, arr, sizeof p);
    size_t nc = *cap ? 2 * *cap : first;
    void *q = realloc(p, nc * elem);
    if (!q)
        return -1;
    memcpy(arr, &q, sizeof q);
    *cap = nc;
    return 0;
}

#endif
