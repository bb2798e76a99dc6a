/* mpc_aby3_int.h — what the aby3 engine's files share (mpc_aby3.c, mpc_aby3_shuf.c): a party's
 * state and the message patterns both use. Private to protocols/backend. */
#ifndef MPCSIM_MPC_ABY3_INT_H
#define MPCSIM_MPC_ABY3_INT_H

#include <stddef.h>
#include <stdint.h>

#include "mpc_eng.h"
#include "mpc_local.h"

typedef struct a3 {
    mpc_core c;
    mpc_prg k0; /* F(K_i) */
    mpc_prg k1; /* F(K_{i+1}) */
} a3;

#define A(e) ((a3 *)(e)->impl)
#define NEXT(i) (((i) + 1) % 3)
#define PREV(i) (((i) + 2) % 3)

/* One round: the message to node `to` (len sl) and from node `from` (len rl); -1 = none. */
int a3_x3(a3 *s, int to, const void *sb, size_t sl, int from, void *rb, size_t rl);
/* z_i computed locally (in z->s[0]) → reshare: send it to P_{i−1}, receive z_{i+1} into s[1]. */
int a3_reshare(a3 *s, mpc_val *z);
/* x (and y, when given) in domain dom with one element count, else an internal error. */
int a3_want(a3 *s, const mpc_val *x, const mpc_val *y, int dom, const char *what);
/* The shuffle (eng.h: shuffle), mpc_aby3_shuf.c. */
int a3_shuffle(eng *e, mpc_val *z, const mpc_val *x, size_t seg, size_t parts);

#endif
