/* mpc_tls.c — TLS 1.3 party channels: key folders, contexts, handshakes, record I/O (mpc_tls.h). */
#include "mpc_tls.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#define CERT_DAYS 3650 /* a key folder's certificates stay valid ten years */

struct mpc_tls {
    SSL_CTX *ctx;
    BIO_METHOD *meth; /* the socket BIO (below); one per context, freed with it */
    int self;
};

struct mpc_tls_conn {
    SSL *ssl;
    int fd;
    uint64_t rx_real; /* receive time of the last bytes read (CLOCK_REALTIME ns), 0: none */
    uint64_t sent, recv;
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The first OpenSSL error of this thread as text (and the queue cleared), or fallback. */
static const char *ossl_reason(char *buf, size_t len, const char *fallback)
{
    unsigned long code = ERR_get_error();
    const char *r = code ? ERR_reason_error_string(code) : NULL;
    snprintf(buf, len, "%s", r ? r : fallback);
    ERR_clear_error();
    return buf;
}

static void node_cn(int i, char *buf, size_t len) { snprintf(buf, len, "mpcsim node %d", i); }

/* ---------------------------------------------------------------- key folders */

static int add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
    X509V3_CTX v;
    X509V3_set_ctx(&v, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *ex = X509V3_EXT_conf_nid(NULL, &v, nid, value);
    if (!ex)
        return -1;
    int ok = X509_add_ext(x, ex, -1);
    X509_EXTENSION_free(ex);
    return ok ? 0 : -1;
}

/* A certificate for key k named cn, signed by ca_key (issuer ca; NULL: self-signed CA). */
static X509 *make_cert(EVP_PKEY *k, const char *cn, X509 *ca, EVP_PKEY *ca_key)
{
    X509 *x = X509_new();
    BIGNUM *serial = BN_new();
    int bad = !x || !serial || !X509_set_version(x, 2) ||
              !BN_rand(serial, 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) ||
              !BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x)) ||
              !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
              !X509_gmtime_adj(X509_getm_notAfter(x), (long)CERT_DAYS * 86400) ||
              !X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                                          (const unsigned char *)cn, -1, -1, 0) ||
              !X509_set_issuer_name(x, ca ? X509_get_subject_name(ca) : X509_get_subject_name(x)) ||
              !X509_set_pubkey(x, k);
    X509 *issuer = ca ? ca : x;
    if (!bad && !ca)
        bad = add_ext(x, issuer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
              add_ext(x, issuer, NID_key_usage, "critical,keyCertSign") ||
              add_ext(x, issuer, NID_subject_key_identifier, "hash");
    else if (!bad)
        bad = add_ext(x, issuer, NID_basic_constraints, "critical,CA:FALSE") ||
              add_ext(x, issuer, NID_key_usage, "critical,digitalSignature") ||
              add_ext(x, issuer, NID_ext_key_usage, "serverAuth,clientAuth") ||
              add_ext(x, issuer, NID_authority_key_identifier, "keyid:always");
    if (!bad)
        bad = !X509_sign(x, ca_key, NULL); /* Ed25519 signs without a separate digest */
    BN_free(serial);
    if (bad) {
        X509_free(x);
        return NULL;
    }
    return x;
}

static int write_file(const char *path, mode_t mode, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        return -1;
    const char *p = buf;
    size_t left = len;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            close(fd);
            return -1;
        }
        p += w;
        left -= (size_t)w;
    }
    if (fchmod(fd, mode) != 0) { /* mode exactly, whatever the umask */
        close(fd);
        return -1;
    }
    return close(fd);
}

/* PEM of a key (in OpenSSL's secure heap, wiped when freed) or of a certificate, to path. */
static int write_pem(const char *path, EVP_PKEY *k, X509 *x)
{
    BIO *m = BIO_new(k ? BIO_s_secmem() : BIO_s_mem());
    int rc = -1;
    if (m && (k ? PEM_write_bio_PKCS8PrivateKey(m, k, NULL, NULL, 0, NULL, NULL)
                : PEM_write_bio_X509(m, x))) {
        char *data;
        long n = BIO_get_mem_data(m, &data);
        rc = n > 0 ? write_file(path, k ? 0600 : 0644, data, (size_t)n) : -1;
    }
    BIO_free(m);
    return rc;
}

static void key_path(char *buf, size_t len, const char *dir, int i, const char *ext)
{
    if (i < 0)
        snprintf(buf, len, "%s/ca.pem", dir);
    else
        snprintf(buf, len, "%s/node%d.%s", dir, i, ext);
}

/* Removes the CA certificate and the first n_nodes nodes' certificates and keys. */
static void unlink_keys(const char *dir, int n_nodes)
{
    char p[4200];
    key_path(p, sizeof p, dir, -1, NULL);
    unlink(p);
    for (int i = 0; i < n_nodes; i++) {
        key_path(p, sizeof p, dir, i, "pem");
        unlink(p);
        key_path(p, sizeof p, dir, i, "key");
        unlink(p);
    }
}

void mpc_tls_remove_keys(const char *dir, int n_nodes)
{
    unlink_keys(dir, n_nodes);
    rmdir(dir);
}

int mpc_tls_make_keys(const char *dir, int n_nodes, errbuf *e)
{
    if (n_nodes < 2 || n_nodes > 16)
        return err_set(e, MS_ERR_USAGE, "keys: %d nodes (2..16)", n_nodes);
    if (strlen(dir) > 4000)
        return err_set(e, MS_ERR_USAGE, "keys: folder name too long");
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return err_set(e, MS_ERR_IO, "%s: cannot make the folder: %s", dir, strerror(errno));
    char p[4200];
    key_path(p, sizeof p, dir, -1, NULL);
    for (int i = -1; i < n_nodes; i++) { /* refuse before writing anything */
        for (int k = 0; k < (i < 0 ? 1 : 2); k++) {
            key_path(p, sizeof p, dir, i, k ? "key" : "pem");
            if (access(p, F_OK) == 0)
                return err_set(e, MS_ERR_IO,
                               "%s already exists: keys are never overwritten (use a new folder)",
                               p);
        }
    }
    EVP_PKEY *ca_key = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    X509 *ca = ca_key ? make_cert(ca_key, "mpcsim session CA", NULL, ca_key) : NULL;
    int rc = MS_OK;
    key_path(p, sizeof p, dir, -1, NULL);
    if (!ca)
        rc = err_set(e, MS_ERR_INTERNAL,
                     "keys: cannot make the CA certificate (OpenSSL without Ed25519?)");
    else if (write_pem(p, NULL, ca))
        rc = err_set(e, MS_ERR_IO, "%s: cannot write: %s", p, strerror(errno));
    int done = 0; /* nodes whose files may exist, for the clean-up */
    for (int i = 0; !rc && i < n_nodes; i++) {
        char cn[32];
        node_cn(i, cn, sizeof cn);
        EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
        X509 *x = k ? make_cert(k, cn, ca, ca_key) : NULL;
        done = i + 1;
        if (!x)
            rc = err_set(e, MS_ERR_INTERNAL, "keys: cannot make node %d's certificate", i);
        key_path(p, sizeof p, dir, i, "key");
        if (!rc && write_pem(p, k, NULL))
            rc = err_set(e, MS_ERR_IO, "%s: cannot write: %s", p, strerror(errno));
        key_path(p, sizeof p, dir, i, "pem");
        if (!rc && write_pem(p, NULL, x))
            rc = err_set(e, MS_ERR_IO, "%s: cannot write: %s", p, strerror(errno));
        X509_free(x);
        EVP_PKEY_free(k);
    }
    X509_free(ca);
    EVP_PKEY_free(ca_key); /* the CA's key dies here: nobody can sign another node later */
    if (rc)
        unlink_keys(dir, done);
    ERR_clear_error();
    return rc;
}

/* ---------------------------------------------------------------- the socket BIO */

static int bio_write(BIO *b, const char *buf, int len)
{
    mpc_tls_conn *c = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    ssize_t w = send(c->fd, buf, (size_t)len, MSG_NOSIGNAL); /* no SIGPIPE from a closed peer */
    if (w < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            BIO_set_retry_write(b);
        return -1;
    }
    c->sent += (uint64_t)w;
    return (int)w;
}

static int bio_read(BIO *b, char *buf, int len)
{
    mpc_tls_conn *c = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    union {
        char buf[CMSG_SPACE(sizeof(struct timespec))];
        struct cmsghdr align;
    } cm;
    struct iovec iov = {.iov_base = buf, .iov_len = (size_t)len};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf, .msg_controllen = sizeof cm.buf};
    ssize_t r = recvmsg(c->fd, &mh, 0);
    if (r < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            BIO_set_retry_read(b);
        return -1;
    }
    for (struct cmsghdr *m = r > 0 ? CMSG_FIRSTHDR(&mh) : NULL; m; m = CMSG_NXTHDR(&mh, m))
        if (m->cmsg_level == SOL_SOCKET && m->cmsg_type == SCM_TIMESTAMPNS) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(m), sizeof ts);
            c->rx_real = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        }
    c->recv += (uint64_t)r;
    return (int)r;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)b, (void)num, (void)ptr;
    return cmd == BIO_CTRL_FLUSH ? 1 : 0; /* writes go straight to the socket */
}

/* ---------------------------------------------------------------- contexts */

static int cert_names(X509 *x, int node)
{
    char want[32], got[64];
    node_cn(node, want, sizeof want);
    int n = x ? X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, got, sizeof got)
              : -1;
    return n > 0 && !strcmp(got, want);
}

/* The node a certificate names ("mpcsim node <i>"), or -1. */
static int cert_node(X509 *x)
{
    char got[64];
    int n = x ? X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, got, sizeof got)
              : -1;
    int id = -1;
    char tail;
    if (n > 0 && sscanf(got, "mpcsim node %d%c", &id, &tail) == 1)
        return id;
    return -1;
}

/* ssh StrictModes-like: the key folder and the files it trusts (CA, certificate, key) must be
 * owned by this user (or root) and writable by nobody else, else another local user could swap
 * the CA or a certificate and be accepted as a node. A file that is missing is left to the
 * loader's own message. */
#define MPC_TLS_PEM_MAX (1 << 20) /* a key folder's PEM files are under 1 kB each */

static int check_owner_mode(const char *path, const char *what, errbuf *e)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return MS_OK;
    if (strcmp(what, "key folder") && (!S_ISREG(st.st_mode) || st.st_size > MPC_TLS_PEM_MAX))
        return err_set(e, MS_ERR_IO, "%s: the %s is %s", path, what,
                       S_ISREG(st.st_mode) ? "larger than 1 MiB (not a PEM file of a key folder)"
                                           : "not a regular file");
    if (st.st_uid != geteuid() && st.st_uid != 0)
        return err_set(e, MS_ERR_IO,
                       "%s: the %s belongs to user %u, not to this user (%u): another user could "
                       "have replaced it; use a key folder of your own (`mpcsim party keys --out "
                       "DIR`)",
                       path, what, (unsigned)st.st_uid, (unsigned)geteuid());
    if (st.st_mode & 022)
        return err_set(e, MS_ERR_IO,
                       "%s: the %s is writable by %s (mode %04o): another user could replace "
                       "it; chmod go-w %s",
                       path, what, (st.st_mode & 002) ? "others" : "its group",
                       (unsigned)(st.st_mode & 07777), path);
    return MS_OK;
}

/* Node self's TLS 1.3 context, its socket BIO method, without keys yet. */
static int ctx_new(int self, mpc_tls **out, errbuf *e)
{
    char r[160];
    mpc_tls *t = calloc(1, sizeof *t);
    if (!t)
        return err_set(e, MS_ERR_NOMEM, "tls: out of memory");
    t->self = self;
    t->ctx = SSL_CTX_new(TLS_method());
    t->meth = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "mpcsim socket");
    if (!t->ctx || !t->meth || !BIO_meth_set_write(t->meth, bio_write) ||
        !BIO_meth_set_read(t->meth, bio_read) || !BIO_meth_set_ctrl(t->meth, bio_ctrl) ||
        !SSL_CTX_set_min_proto_version(t->ctx, TLS1_3_VERSION) ||
        !SSL_CTX_set_max_proto_version(t->ctx, TLS1_3_VERSION) ||
        !SSL_CTX_set_num_tickets(t->ctx, 0)) {
        int rc = err_set(e, MS_ERR_INTERNAL, "tls: cannot set up a TLS 1.3 context: %s",
                         ossl_reason(r, sizeof r, "?"));
        mpc_tls_free(t);
        ERR_clear_error();
        return rc;
    }
    *out = t;
    return MS_OK;
}

/* A context with its keys and CA: the CA is the only trust anchor; a peer must present a
 * certificate. */
static void ctx_finish(mpc_tls *t)
{
    SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    SSL_CTX_set_verify_depth(t->ctx, 1);
    SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_options(t->ctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
}

int mpc_tls_load(const char *dir, int self, mpc_tls **out, errbuf *e)
{
    char ca[4200], crt[4200], key[4200], r[160];
    if (strlen(dir) > 4000)
        return err_set(e, MS_ERR_USAGE, "--keys: folder name too long");
    key_path(ca, sizeof ca, dir, -1, NULL);
    key_path(crt, sizeof crt, dir, self, "pem");
    key_path(key, sizeof key, dir, self, "key");
    int mc = check_owner_mode(dir, "key folder", e);
    if (!mc)
        mc = check_owner_mode(ca, "session CA", e);
    if (!mc)
        mc = check_owner_mode(crt, "certificate", e);
    if (mc)
        return mc;
    struct stat st;
    if (stat(key, &st) != 0)
        return err_set(e, MS_ERR_IO,
                       "%s: cannot read node %d's key: %s (make a key folder with `mpcsim party "
                       "keys --out DIR`)",
                       key, self, strerror(errno));
    if (st.st_mode & 077)
        return err_set(e, MS_ERR_IO,
                       "%s: the private key is readable by others (mode %04o): chmod 600 it", key,
                       (unsigned)(st.st_mode & 07777));
    if ((mc = check_owner_mode(key, "private key", e)))
        return mc;
    mpc_tls *t = NULL;
    int rc = ctx_new(self, &t, e);
    if (rc)
        return rc;
    if (SSL_CTX_use_certificate_file(t->ctx, crt, SSL_FILETYPE_PEM) != 1)
        rc = err_set(e, MS_ERR_IO, "%s: cannot load node %d's certificate: %s", crt, self,
                     ossl_reason(r, sizeof r, "?"));
    else if (!cert_names(SSL_CTX_get0_certificate(t->ctx), self))
        rc = err_set(e, MS_ERR_INPUT, "%s is not node %d's certificate", crt, self);
    else if (SSL_CTX_use_PrivateKey_file(t->ctx, key, SSL_FILETYPE_PEM) != 1)
        rc = err_set(e, MS_ERR_INPUT, "%s: cannot use node %d's key: %s (not the key of %s?)", key,
                     self, ossl_reason(r, sizeof r, "?"), crt);
    else if (SSL_CTX_check_private_key(t->ctx) != 1)
        rc = err_set(e, MS_ERR_INPUT, "%s does not belong to %s (%s)", key, crt,
                     ossl_reason(r, sizeof r, "?"));
    else if (SSL_CTX_load_verify_locations(t->ctx, ca, NULL) != 1)
        rc = err_set(e, MS_ERR_IO, "%s: cannot load the session CA: %s", ca,
                     ossl_reason(r, sizeof r, "?"));
    if (rc) {
        mpc_tls_free(t);
        ERR_clear_error();
        return rc;
    }
    ctx_finish(t);
    *out = t;
    return MS_OK;
}

int mpc_tls_make_mem(int n_nodes, mpc_tls **out, errbuf *e)
{
    if (n_nodes < 2 || n_nodes > 16)
        return err_set(e, MS_ERR_USAGE, "keys: %d nodes (2..16)", n_nodes);
    memset(out, 0, sizeof *out * (size_t)n_nodes);
    EVP_PKEY *ca_key = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    X509 *ca = ca_key ? make_cert(ca_key, "mpcsim session CA", NULL, ca_key) : NULL;
    int rc = ca ? MS_OK
                : err_set(e, MS_ERR_INTERNAL,
                          "keys: cannot make the CA certificate (OpenSSL without Ed25519?)");
    for (int i = 0; !rc && i < n_nodes; i++) {
        char cn[32], r[160];
        node_cn(i, cn, sizeof cn);
        EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
        X509 *x = k ? make_cert(k, cn, ca, ca_key) : NULL;
        if (!x)
            rc = err_set(e, MS_ERR_INTERNAL, "keys: cannot make node %d's certificate", i);
        if (!rc)
            rc = ctx_new(i, &out[i], e);
        /* the context takes its own references: the certificate, the key, the CA (the store's
         * only trust anchor) */
        if (!rc && (SSL_CTX_use_certificate(out[i]->ctx, x) != 1 ||
                    SSL_CTX_use_PrivateKey(out[i]->ctx, k) != 1 ||
                    SSL_CTX_check_private_key(out[i]->ctx) != 1 ||
                    X509_STORE_add_cert(SSL_CTX_get_cert_store(out[i]->ctx), ca) != 1))
            rc = err_set(e, MS_ERR_INTERNAL, "tls: cannot use node %d's keys: %s", i,
                         ossl_reason(r, sizeof r, "?"));
        if (!rc)
            ctx_finish(out[i]);
        X509_free(x);
        EVP_PKEY_free(k);
    }
    X509_free(ca);
    EVP_PKEY_free(ca_key); /* the CA's key dies here: nobody can sign another node later */
    if (rc)
        for (int i = 0; i < n_nodes; i++) {
            mpc_tls_free(out[i]);
            out[i] = NULL;
        }
    ERR_clear_error();
    return rc;
}

void mpc_tls_free(mpc_tls *t)
{
    if (!t)
        return;
    SSL_CTX_free(t->ctx);
    BIO_meth_free(t->meth);
    free(t);
}

/* ---------------------------------------------------------------- connections */

static int wait_io(int fd, int want_write, uint64_t deadline)
{
    uint64_t now = mono_ns();
    if (now >= deadline)
        return 0;
    struct pollfd p = {.fd = fd, .events = want_write ? POLLOUT : POLLIN};
    int ms = (int)((deadline - now + 999999) / 1000000), r;
    do
        r = poll(&p, 1, ms);
    while (r < 0 && errno == EINTR);
    return r > 0;
}

/* What SSL_get_error says about a failed call, as the module's return codes. */
static int ssl_status(mpc_tls_conn *c, int ret, char *why, size_t wlen)
{
    int err = SSL_get_error(c->ssl, ret);
    switch (err) {
    case SSL_ERROR_WANT_READ: return MPC_TLS_WANT_READ;
    case SSL_ERROR_WANT_WRITE: return MPC_TLS_WANT_WRITE;
    case SSL_ERROR_ZERO_RETURN: return MPC_TLS_EOF;
    case SSL_ERROR_SYSCALL:
        if (!ERR_peek_error()) {
            ERR_clear_error();
            return MPC_TLS_EOF; /* the peer closed without close_notify (or reset) */
        }
        /* fall through */
    default: {
        char r[160];
        long v = SSL_get_verify_result(c->ssl);
        ossl_reason(r, sizeof r, "TLS failure");
        if (v != X509_V_OK && strstr(r, "certificate verify failed"))
            snprintf(why, wlen, "%s: %s", r, X509_verify_cert_error_string(v));
        else
            snprintf(why, wlen, "%s", r);
        return MPC_TLS_FAIL;
    }
    }
}

/* A connection on fd with its SSL object behind our socket BIO, in the accepting or the
 * connecting state; NULL on OOM. */
static mpc_tls_conn *conn_new(mpc_tls *t, int fd, int server)
{
    mpc_tls_conn *c = calloc(1, sizeof *c);
    BIO *b = c ? BIO_new(t->meth) : NULL;
    if (!b) {
        free(c);
        return NULL;
    }
    c->fd = fd;
    BIO_set_data(b, c);
    BIO_set_init(b, 1);
    c->ssl = SSL_new(t->ctx);
    if (!c->ssl) {
        BIO_free(b);
        free(c);
        return NULL;
    }
    SSL_set_bio(c->ssl, b, b);
    if (server)
        SSL_set_accept_state(c->ssl);
    else
        SSL_set_connect_state(c->ssl);
    return c;
}

/* One attempt at the TLS 1.3 handshake proper: MS_OK with *wants 0 when done, or with *wants
 * the socket readiness it waits for; else the error, said of peer_name. */
static int hs_try(mpc_tls_conn *c, const char *peer_name, int *wants, errbuf *why)
{
    char r[300];
    *wants = 0;
    int h = SSL_do_handshake(c->ssl);
    if (h == 1)
        return MS_OK;
    int s = ssl_status(c, h, r, sizeof r);
    if (s == MPC_TLS_WANT_READ || s == MPC_TLS_WANT_WRITE) {
        *wants = s;
        return MS_OK;
    }
    if (s == MPC_TLS_EOF) /* MS_ERR_NET: a dialler tries again (mpc_net_dial.c, net_dial) */
        return err_set(why, MS_ERR_NET,
                       "%s closed the connection during the TLS handshake (a peer run with "
                       "--insecure-plaintext, or an mpcsim of another frame version? see its log)",
                       peer_name);
    if (strstr(r, "alert"))
        return err_set(why, MS_ERR_PEER,
                       "%s refused this node's certificate (TLS %s): are all nodes' keys from the "
                       "same `mpcsim party keys` folder?",
                       peer_name, r);
    return err_set(why, MS_ERR_PEER,
                   "TLS handshake with %s failed: %s (keys from another `mpcsim party keys` "
                   "folder?)",
                   peer_name, r);
}

/* The CA vouched for the peer's certificate; it must also name the node we meant to reach. */
static int check_peer_node(mpc_tls_conn *c, int peer, const char *peer_name, errbuf *why)
{
    X509 *pc = SSL_get0_peer_certificate(c->ssl);
    if (cert_names(pc, peer))
        return MS_OK;
    int got = cert_node(pc);
    if (got >= 0)
        return err_set(why, MS_ERR_PEER,
                       "the peer taken for %s presented node %d's certificate: refused "
                       "(a node posing as another, or --peers/--id mixed up)",
                       peer_name, got);
    return err_set(why, MS_ERR_PEER,
                   "the peer taken for %s presented a certificate that names no node: "
                   "refused",
                   peer_name);
}

/* One attempt at the confirmation (as hs_try): the accepting side has checked the name and
 * confirms, and the connecting side waits for the confirmation (in TLS 1.3 a client's
 * handshake ends before the server has verified the client's certificate; a rejection would
 * otherwise show only at the first read). */
static int confirm_try(mpc_tls_conn *c, int server, const char *peer_name, int *wants, errbuf *why)
{
    static const uint8_t yes = 0xa5;
    char r[300];
    size_t n = 0;
    uint8_t got = 0;
    *wants = 0;
    int s = server ? mpc_tls_write(c, &yes, 1, &n, r, sizeof r)
                   : mpc_tls_read(c, &got, 1, &n, r, sizeof r);
    if (s == 0 && (server || got == yes))
        return MS_OK;
    if (s == 0)
        return err_set(why, MS_ERR_PROTO, "%s sent no TLS confirmation", peer_name);
    if (s == MPC_TLS_WANT_READ || s == MPC_TLS_WANT_WRITE) {
        *wants = s;
        return MS_OK;
    }
    if (s == MPC_TLS_EOF)
        return err_set(why, MS_ERR_PEER,
                       "%s closed the connection after the TLS handshake: it did not accept this "
                       "node's certificate (see its log)",
                       peer_name);
    return err_set(why, MS_ERR_PEER,
                   "%s refused this node's certificate (TLS %s): are all nodes' keys from "
                   "the same `mpcsim party keys` folder?",
                   peer_name, r);
}

/* A handshake in progress: the connection, its side, the node it must be, and how far. */
struct mpc_tls_hs {
    mpc_tls_conn *c;
    int server, peer;
    int confirming; /* the handshake proper is done and the peer's name checked */
    char name[200];
};

int mpc_tls_hs_begin(mpc_tls *t, int fd, int server, int peer, const char *peer_name,
                     mpc_tls_hs **out, errbuf *why)
{
    mpc_tls_hs *h = calloc(1, sizeof *h);
    if (!h || !(h->c = conn_new(t, fd, server))) {
        free(h);
        return err_set(why, MS_ERR_NOMEM, "tls: out of memory");
    }
    h->server = server;
    h->peer = peer;
    snprintf(h->name, sizeof h->name, "%s", peer_name);
    *out = h;
    return MS_OK;
}

void mpc_tls_hs_free(mpc_tls_hs *h)
{
    if (!h)
        return;
    if (h->c) {
        SSL_free(h->c->ssl);
        free(h->c);
    }
    free(h);
    ERR_clear_error();
}

int mpc_tls_hs_step(mpc_tls_hs *h, int *wants, mpc_tls_conn **out, errbuf *why)
{
    ERR_clear_error();
    int rc = MS_OK;
    *wants = 0;
    if (!h->confirming) {
        rc = hs_try(h->c, h->name, wants, why);
        if (rc || *wants)
            return rc;
        if ((rc = check_peer_node(h->c, h->peer, h->name, why)))
            return rc;
        h->confirming = 1;
    }
    rc = confirm_try(h->c, h->server, h->name, wants, why);
    if (rc || *wants)
        return rc;
    *out = h->c;
    h->c = NULL;
    return MS_OK;
}

int mpc_tls_hs_timeout(const mpc_tls_hs *h, errbuf *why)
{
    return err_set(why, MS_ERR_TIMEOUT, "%s did not %s the TLS handshake in time", h->name,
                   h->confirming ? "confirm" : "complete");
}

int mpc_tls_handshake(mpc_tls *t, int fd, int server, int peer, const char *peer_name,
                      uint64_t deadline_ns, mpc_tls_conn **out, errbuf *why)
{
    mpc_tls_hs *h = NULL;
    int rc = mpc_tls_hs_begin(t, fd, server, peer, peer_name, &h, why), wants = 0;
    while (!rc && !(rc = mpc_tls_hs_step(h, &wants, out, why)) && wants)
        if (!wait_io(fd, wants == MPC_TLS_WANT_WRITE, deadline_ns))
            rc = mpc_tls_hs_timeout(h, why);
    mpc_tls_hs_free(h);
    return rc;
}

int mpc_tls_write(mpc_tls_conn *c, const void *buf, size_t len, size_t *n, char *why, size_t wlen)
{
    ERR_clear_error();
    int w = SSL_write_ex(c->ssl, buf, len, n);
    return w == 1 ? 0 : ssl_status(c, w, why, wlen);
}

int mpc_tls_read(mpc_tls_conn *c, void *buf, size_t len, size_t *n, char *why, size_t wlen)
{
    ERR_clear_error();
    int r = SSL_read_ex(c->ssl, buf, len, n);
    return r == 1 ? 0 : ssl_status(c, r, why, wlen);
}

uint64_t mpc_tls_take_rx_realtime(mpc_tls_conn *c)
{
    uint64_t t = c->rx_real;
    c->rx_real = 0;
    return t;
}

void mpc_tls_wire(const mpc_tls_conn *c, uint64_t *sent, uint64_t *recv)
{
    *sent = c ? c->sent : 0;
    *recv = c ? c->recv : 0;
}

void mpc_tls_close(mpc_tls_conn *c)
{
    if (!c)
        return;
    ERR_clear_error();
    SSL_shutdown(c->ssl); /* close_notify if the socket takes it; the peer's is not awaited */
    ERR_clear_error();
    SSL_free(c->ssl);
    free(c);
}
