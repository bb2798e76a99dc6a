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
    /* Encrypting zeros in place yields the keystream; chunks keep the int length in range. */
    uint8_t *p = out;
    memset(p, 0, nbytes);
    while (nbytes) {
        int chunk = nbytes > (1u << 30) ? (1 << 30) : (int)nbytes;
        int outl = 0;
        EVP_EncryptUpdate(g->ctx, p, &outl, p, chunk);
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
