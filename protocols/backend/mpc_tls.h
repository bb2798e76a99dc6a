/* mpc_tls.h — TLS 1.3 for the backend's party channels (OpenSSL): per-node keys signed by a
 * session CA, mutual authentication that names the peer's node id, and a socket BIO that keeps
 * the kernel's receive times (the injected latency needs them) and counts the bytes on the wire.
 *
 * A key folder (mpc_tls_make_keys, `mpcsim party keys`) holds ca.pem, the CA's certificate,
 * and for every node i node<i>.pem (its certificate, subject CN "mpcsim node <i>", signed by
 * the CA) and node<i>.key (its Ed25519 private key, mode 0600). The CA's private key is never
 * written: once the folder is made nobody can sign another node's certificate, so a new session
 * of nodes gets a new folder. Each host needs ca.pem and its own node's two files only.
 *
 * A connection is authenticated both ways: each side presents its node certificate, each side
 * accepts only a chain to ca.pem whose leaf names the node it expects (the connecting side: the
 * node it dialled; the accepting side: the node the connecting peer's hello claimed). TLS 1.3
 * only (RFC 8446), no session tickets or resumption, no compression. */
#ifndef MPCSIM_MPC_TLS_H
#define MPCSIM_MPC_TLS_H

#include <stddef.h>
#include <stdint.h>

#include "protocols/base/err.h"

/* RFC 8446 §5.1: a record carries at most 2^14 bytes of plaintext. The backend writes every
 * frame as its own run of records of at most this size (mpc_net.c), so a frame of m bytes
 * (header + payload) is ceil(m / MPC_TLS_RECORD) records. */
#define MPC_TLS_RECORD 16384u
/* RFC 8446 §5.2: a TLSCiphertext record adds a 5-byte header (opaque_type, legacy_record_version,
 * length), the 1-byte inner content type, and the AEAD tag: 16 bytes for every TLS 1.3 suite
 * OpenSSL offers by default (AES-GCM, RFC 5116 §5.1; ChaCha20-Poly1305, RFC 8439 §2.8). No
 * padding is added (OpenSSL pads only when asked to). */
#define MPC_TLS_OVERHEAD 22u

typedef struct mpc_tls mpc_tls;           /* one node's context: its key, its CA */
typedef struct mpc_tls_conn mpc_tls_conn; /* one authenticated connection */

/* Writes a key folder for n_nodes nodes into dir (made with mode 0700 if missing; files that
 * already exist there are an error, nothing is overwritten). On failure every file written is
 * removed again. */
int mpc_tls_make_keys(const char *dir, int n_nodes, errbuf *e);
/* Removes the files mpc_tls_make_keys wrote and dir itself (a temporary folder). */
void mpc_tls_remove_keys(const char *dir, int n_nodes);

/* The same keys made in memory only, for nodes that run in processes forked from this one (the
 * loopback launchers): out[i] is node i's context, with its key, its certificate and the CA
 * (whose private key is dropped before this returns). Nothing is written to disk. */
int mpc_tls_make_mem(int n_nodes, mpc_tls **out, errbuf *e);

/* Loads node self's key and certificate and the CA from dir. A key file that others can read,
 * a certificate that does not name node self or does not match the key is an error. */
int mpc_tls_load(const char *dir, int self, mpc_tls **out, errbuf *e);
void mpc_tls_free(mpc_tls *t);

/* Runs the handshake on the connected, non-blocking socket fd (not taken over) until done or
 * deadline_ns (CLOCK_MONOTONIC). server: this side accepted the connection. The peer must
 * present a certificate of node `peer`; the accepting side then confirms with one byte, which
 * the connecting side awaits, so either side knows on return that the other accepted it. On
 * error, why says what the peer did, in a sentence naming it by peer_name. */
int mpc_tls_handshake(mpc_tls *t, int fd, int server, int peer, const char *peer_name,
                      uint64_t deadline_ns, mpc_tls_conn **out, errbuf *why);

/* The same handshake driven by the caller's poll, for many connections at once:
 * mpc_tls_hs_begin makes it; each mpc_tls_hs_step goes as far as the socket allows and returns
 * MS_OK with *wants set to MPC_TLS_WANT_READ or MPC_TLS_WANT_WRITE (poll fd for that, then step
 * again), MS_OK with *wants 0 and *out the authenticated connection, or the error
 * mpc_tls_handshake would give. mpc_tls_hs_timeout sets the error of a deadline passed, saying
 * how far it got. mpc_tls_hs_free frees it (the connection handed out stays). */
typedef struct mpc_tls_hs mpc_tls_hs;
int mpc_tls_hs_begin(mpc_tls *t, int fd, int server, int peer, const char *peer_name,
                     mpc_tls_hs **out, errbuf *why);
int mpc_tls_hs_step(mpc_tls_hs *h, int *wants, mpc_tls_conn **out, errbuf *why);
int mpc_tls_hs_timeout(const mpc_tls_hs *h, errbuf *why);
void mpc_tls_hs_free(mpc_tls_hs *h);

/* Non-blocking record I/O. Return 0 with *n set when bytes moved; MPC_TLS_WANT_READ or
 * MPC_TLS_WANT_WRITE when the socket must become readable / writable first; MPC_TLS_EOF when
 * the peer closed; MPC_TLS_FAIL with why filled (a record that does not decrypt, an alert).
 * A write of at most MPC_TLS_RECORD bytes is one record; after a WANT_* it must be repeated
 * with the same buffer and length. */
enum { MPC_TLS_WANT_READ = 1, MPC_TLS_WANT_WRITE, MPC_TLS_EOF, MPC_TLS_FAIL };
int mpc_tls_write(mpc_tls_conn *c, const void *buf, size_t len, size_t *n, char *why, size_t wlen);
int mpc_tls_read(mpc_tls_conn *c, void *buf, size_t len, size_t *n, char *why, size_t wlen);
/* The kernel's receive time (CLOCK_REALTIME, as SO_TIMESTAMPNS gives it) of the bytes read
 * last, 0 if unknown; cleared by the call. */
uint64_t mpc_tls_take_rx_realtime(mpc_tls_conn *c);
/* Bytes written to / read from the socket so far (records, handshake, alerts). */
void mpc_tls_wire(const mpc_tls_conn *c, uint64_t *sent, uint64_t *recv);
/* Sends close_notify (without waiting for the peer's) and frees the connection; fd stays open. */
void mpc_tls_close(mpc_tls_conn *c);

#endif
