/* invariant.h — MPCSIM_ASSERT: an internal invariant (never a check of user input), checked in
 * the debug and sanitizer builds (VARIANT=debug|san define MPCSIM_CHECKED) and compiled out of
 * the release build, where the expression is not evaluated. For checks too costly to run on
 * every call in a release build: a structure's whole-state *_is_sane walk after it changed. */
#ifndef MPCSIM_INVARIANT_H
#define MPCSIM_INVARIANT_H

#ifdef MPCSIM_CHECKED
#include <stdio.h>
#include <stdlib.h>
#define MPCSIM_ASSERT(cond)                                                                       \
    ((cond)                                                                                       \
         ? (void)0                                                                                \
         : (fprintf(stderr, "%s:%d: internal invariant failed: %s\n", __FILE__, __LINE__, #cond), \
            abort()))
#else
#define MPCSIM_ASSERT(cond) ((void)sizeof((cond) ? 1 : 0))
#endif

#endif
