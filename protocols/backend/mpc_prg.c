/* mpc_prg.c — AES-128-CTR keystream via OpenSSL EVP (AES-NI when the CPU has it). */
#include "mpc_prg.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

void mpc_prg_wipe(void *p, size_t n) { OPENSSL_cleanse(p, n); }

int mpc_prg_init(mpc_prg *g, const uint8_t key[MPC_KEY_BYTES], uint64_t stream, errbuf *e)
{
    uint8_t iv[16] = {0};
    for (int i = 0; i < 8; i++)
        iv[i] = (uint8_t)(stream >> (8 * i));
    g->drawn = 0;
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    if (!ctx)
        return err_set(e, MS_ERR_NOMEM, "mpc prg: cannot allocate a cipher context");
    if (EVP_EncryptInit_ex(ctx, EVP_aes_128_ctr(), NULL, key, iv) != 1) {
        EVP_CIPHER_CTX_free(ctx);
        return err_set(e, MS_ERR_INTERNAL, "mpc prg: AES-128-CTR initialisation failed");
    }
    g->ctx = ctx;
    return MS_OK;
}

void mpc_prg_free(mpc_prg *g)
{
    if (g->ctx)
        EVP_CIPHER_CTX_free(g->ctx);
    g->ctx = NULL;
}

void mpc_prg_bytes(mpc_prg *g, void *out, size_t nbytes)
{
    /* The keystream is the encryption of zeros, read from a static block in chunks: no pass
     * zeroing out first. CTR carries its position across calls, so the stream is the same as
     * one call over the whole buffer. */
    static const uint8_t zeros[1 << 14];
    uint8_t *p = out;
    while (nbytes) {
        int chunk = nbytes > sizeof zeros ? (int)sizeof zeros : (int)nbytes;
        int outl = 0;
        EVP_EncryptUpdate(g->ctx, p, &outl, zeros, chunk);
        p += chunk;
        nbytes -= (size_t)chunk;
        g->drawn += (uint64_t)chunk;
    }
}

int mpc_prg_random_key(uint8_t key[MPC_KEY_BYTES], errbuf *e)
{
    size_t got = 0;
    while (got < MPC_KEY_BYTES) {
        ssize_t r = getrandom(key + got, MPC_KEY_BYTES - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return err_set(e, MS_ERR_IO, "mpc prg: getrandom failed: %s", strerror(errno));
        }
        got += (size_t)r;
    }
    return MS_OK;
}
