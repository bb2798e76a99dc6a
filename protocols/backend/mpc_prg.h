/* mpc_prg.h — the backend's cryptographic PRG: AES-128 in counter mode (OpenSSL libcrypto EVP).
 *
 * Secret shares and correlated randomness come only from here (never from GSL). Two parties that
 * hold the same 16-byte key and stream id draw the same keystream as long as they draw the same
 * total number of bytes in the same order; how the draws are chunked does not matter (CTR is a
 * stream). Keys come from the OS (getrandom) and are exchanged once at setup. */
#ifndef MPCSIM_MPC_PRG_H
#define MPCSIM_MPC_PRG_H

#include <stddef.h>
#include <stdint.h>

#include "protocols/base/err.h"

#define MPC_KEY_BYTES 16

typedef struct mpc_prg {
    void *ctx;      /* EVP_CIPHER_CTX */
    uint64_t drawn; /* bytes of keystream drawn so far */
} mpc_prg;

/* Keys the stream: AES-128-CTR with key and IV = (stream, 0). */
int mpc_prg_init(mpc_prg *g, const uint8_t key[MPC_KEY_BYTES], uint64_t stream, errbuf *e);
void mpc_prg_free(mpc_prg *g);
/* Fills out with the next nbytes of keystream. */
void mpc_prg_bytes(mpc_prg *g, void *out, size_t nbytes);
static inline void mpc_prg_u64(mpc_prg *g, uint64_t *out, size_t n)
{
    mpc_prg_bytes(g, out, n * sizeof *out);
}
/* Wipes a secret (a key, a seed) with OPENSSL_cleanse: a plain memset before the buffer dies
 * is a dead store the compiler may drop. */
void mpc_prg_wipe(void *p, size_t n);
/* A fresh key from the operating system's CSPRNG. */
int mpc_prg_random_key(uint8_t key[MPC_KEY_BYTES], errbuf *e);

#endif
