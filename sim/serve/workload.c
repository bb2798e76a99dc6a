/* workload.c — request workloads: storage, the seeded generator, the replay file format. */
#include "workload.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>

#define WL_MAX_PROMPT (1u << 22) /* cap on one prompt's length (growable buffers have a cap) */
#define WL_MAX_USERS (1u << 24)  /* tenants × users_per_tenant: user ids are 32-bit */
#define WL_LINE_MAX (64u << 20)  /* one replay line: a prompt at the cap takes under 50 MiB */
#define WL_FILE_MAX (4ull << 30) /* a replay file */
#define WL_MAX_SHARED                                                   \
    (1ull << 28) /* tokens of every system prompt, context and document \
                  * drawn up front (1 GiB of ids) */

/* ---- storage ---------------------------------------------------------------------------- */

void wl_init(workload *w) { memset(w, 0, sizeof *w); }

void wl_free(workload *w)
{
    free(w->req);
    free(w->tok);
    free(w->sens);
    wl_init(w);
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

int wl_add(workload *w, uint64_t arrival_ns, uint32_t tenant, uint32_t user, uint32_t decode_len,
           const uint32_t *tok, const uint8_t *sens, uint32_t n, errbuf *e)
{
    if (n == 0 || n > WL_MAX_PROMPT || decode_len == 0)
        return err_set(e, MS_ERR_RANGE,
                       "request with %u prompt tokens and %u output tokens "
                       "(need 1..%u and >= 1)",
                       n, decode_len, WL_MAX_PROMPT);
    size_t c_tok = w->cap_tok, c_sens = w->cap_tok; /* tok and sens grow in step */
    if (grow((void **)&w->req, &w->cap, w->n + 1, sizeof *w->req) ||
        grow((void **)&w->tok, &c_tok, w->n_tok + n, sizeof *w->tok) ||
        grow((void **)&w->sens, &c_sens, w->n_tok + n, sizeof *w->sens))
        return err_set(e, MS_ERR_NOMEM, "out of memory for the workload");
    w->cap_tok = c_tok;
    wl_request *r = &w->req[w->n++];
    *r = (wl_request){.arrival_ns = arrival_ns,
                      .tenant = tenant,
                      .user = user,
                      .decode_len = decode_len,
                      .n_tokens = n,
                      .off = w->n_tok};
    memcpy(w->tok + w->n_tok, tok, n * sizeof *tok);
    if (sens)
        memcpy(w->sens + w->n_tok, sens, n);
    else
        memset(w->sens + w->n_tok, 0, n);
    w->n_tok += n;
    return MS_OK;
}

/* ---- generator -------------------------------------------------------------------------- */

void wl_params_default(wl_params *p)
{
    *p = (wl_params){.seed = 1,
                     .n_requests = 1000,
                     .rate = 1.0,
                     .n_tenants = 2,
                     .users_per_tenant = 8,
                     .sys_len = 512,
                     .user_ctx_len = 0,
                     .n_docs = 0,
                     .doc_len = 256,
                     .docs_per_req = 0,
                     .doc_zipf = 1.0,
                     .turn_min = 16,
                     .turn_max = 64,
                     .decode_min = 16,
                     .decode_max = 64,
                     .pii_fraction = 1.0,
                     .pii_run = 4,
                     .vocab = 32000};
}

int wl_params_check(const wl_params *p, errbuf *e)
{
    if (p->n_requests == 0)
        return err_set(e, MS_ERR_RANGE, "workload: requests must be >= 1");
    if (!(p->rate > 0) || !isfinite(p->rate))
        return err_set(e, MS_ERR_RANGE, "workload: rate must be > 0 requests/s");
    if (p->n_tenants == 0 || p->users_per_tenant == 0)
        return err_set(e, MS_ERR_RANGE, "workload: tenants and users_per_tenant must be >= 1");
    if (p->turn_min == 0 || p->turn_min > p->turn_max)
        return err_set(e, MS_ERR_RANGE, "workload: need 1 <= turn_min <= turn_max");
    if (p->decode_min == 0 || p->decode_min > p->decode_max)
        return err_set(e, MS_ERR_RANGE, "workload: need 1 <= decode_min <= decode_max");
    if (p->docs_per_req > 0 && (p->n_docs == 0 || p->doc_len == 0))
        return err_set(e, MS_ERR_RANGE, "workload: docs_per_req > 0 needs n_docs and doc_len");
    if (!(p->pii_fraction >= 0 && p->pii_fraction <= 1) || p->pii_run == 0)
        return err_set(e, MS_ERR_RANGE, "workload: need 0 <= pii_fraction <= 1, pii_run >= 1");
    if (p->vocab < 2 || p->doc_zipf < 0)
        return err_set(e, MS_ERR_RANGE, "workload: need vocab >= 2 and doc_zipf >= 0");
    /* a product of two 32-bit fields fits 64 bits */
    uint64_t max = (uint64_t)p->sys_len + p->user_ctx_len + (uint64_t)p->docs_per_req * p->doc_len +
                   p->turn_max;
    if (max > WL_MAX_PROMPT)
        return err_set(e, MS_ERR_RANGE, "workload: prompts up to %llu tokens exceed the cap %u",
                       (unsigned long long)max, WL_MAX_PROMPT);
    uint64_t users = (uint64_t)p->n_tenants * p->users_per_tenant;
    if (users > WL_MAX_USERS)
        return err_set(e, MS_ERR_RANGE,
                       "workload: tenants × users_per_tenant = %llu users exceed the cap %u",
                       (unsigned long long)users, WL_MAX_USERS);
    /* n_tenants <= users <= 2^24, so the first two products stay below 2^56 and the third
     * (below 2^64) is capped before the sum */
    uint64_t docs = (uint64_t)p->n_docs * p->doc_len;
    uint64_t shared = docs > WL_MAX_SHARED
                          ? docs
                          : (uint64_t)p->n_tenants * p->sys_len + users * p->user_ctx_len + docs;
    if (shared > WL_MAX_SHARED)
        return err_set(e, MS_ERR_RANGE,
                       "workload: system prompts, user contexts and documents hold %llu tokens, "
                       "above the cap %llu",
                       (unsigned long long)shared, (unsigned long long)WL_MAX_SHARED);
    return MS_OK;
}

static void fill_random(gsl_rng *r, uint32_t *t, size_t n, uint32_t vocab)
{
    for (size_t i = 0; i < n; i++)
        t[i] = (uint32_t)gsl_rng_uniform_int(r, vocab);
}

/* One prompt: system prompt | user context | documents | user turn (seg: the tenant's system
 * prompt, the user's context, the document pool); returns its length. */
static size_t assemble(const wl_params *p, gsl_rng *r, const gsl_ran_discrete_t *docs,
                       const uint32_t *const seg[3], uint32_t *tok, uint8_t *sens)
{
    size_t n = 0;
    memcpy(tok + n, seg[0], p->sys_len * sizeof *tok);
    memset(sens + n, 0, p->sys_len);
    n += p->sys_len;
    memcpy(tok + n, seg[1], p->user_ctx_len * sizeof *tok);
    memset(sens + n, 1, p->user_ctx_len);
    n += p->user_ctx_len;
    for (uint32_t d = 0; d < p->docs_per_req; d++) {
        size_t k = gsl_ran_discrete(r, docs);
        memcpy(tok + n, seg[2] + k * p->doc_len, p->doc_len * sizeof *tok);
        memset(sens + n, 0, p->doc_len);
        n += p->doc_len;
    }
    uint32_t turn = p->turn_min + (uint32_t)gsl_rng_uniform_int(r, p->turn_max - p->turn_min + 1);
    fill_random(r, tok + n, turn, p->vocab);
    for (uint32_t j = 0; j < turn; j += p->pii_run) {
        uint8_t s = p->pii_fraction >= 1 || gsl_rng_uniform(r) < p->pii_fraction;
        for (uint32_t q = j; q < turn && q < j + p->pii_run; q++)
            sens[n + q] = s;
    }
    return n + turn;
}

/* Draws every shared segment (system prompts, user contexts, documents) up front, then each
 * request's arrival, user, documents, turn and output length, in that order. */
int wl_generate(const wl_params *p, workload *w, errbuf *e)
{
    int rc = wl_params_check(p, e);
    if (rc)
        return rc;
    uint32_t n_users = p->n_tenants * p->users_per_tenant; /* at most WL_MAX_USERS */
    size_t seg_n = (size_t)p->n_tenants * p->sys_len + (size_t)n_users * p->user_ctx_len +
                   (size_t)p->n_docs * p->doc_len;
    size_t max_prompt =
        (size_t)p->sys_len + p->user_ctx_len + (size_t)p->docs_per_req * p->doc_len + p->turn_max;
    uint32_t *seg = malloc((seg_n + 1) * sizeof *seg);
    uint32_t *tok = malloc(max_prompt * sizeof *tok);
    uint8_t *sens = malloc(max_prompt);
    double *wdoc = malloc(((size_t)p->n_docs + 1) * sizeof *wdoc);
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    gsl_ran_discrete_t *docs = NULL;
    if (!seg || !tok || !sens || !wdoc || !r) {
        rc = err_set(e, MS_ERR_NOMEM, "out of memory generating the workload");
        goto out;
    }
    gsl_rng_set(r, p->seed);
    fill_random(r, seg, seg_n, p->vocab);
    const uint32_t *sys = seg, *ctx = seg + (size_t)p->n_tenants * p->sys_len;
    const uint32_t *doc = ctx + (size_t)n_users * p->user_ctx_len;
    if (p->n_docs) {
        for (uint32_t k = 0; k < p->n_docs; k++)
            wdoc[k] = 1.0 / pow(k + 1.0, p->doc_zipf);
        docs = gsl_ran_discrete_preproc(p->n_docs, wdoc);
        if (!docs) {
            rc = err_set(e, MS_ERR_NOMEM, "out of memory for the document distribution");
            goto out;
        }
    }
    double t_s = 0;
    for (uint32_t i = 0; i < p->n_requests && !rc; i++) {
        t_s += gsl_ran_exponential(r, 1.0 / p->rate);
        uint32_t user = (uint32_t)gsl_rng_uniform_int(r, n_users);
        uint32_t tenant = user / p->users_per_tenant;
        const uint32_t *seg_of[3] = {sys + (size_t)tenant * p->sys_len,
                                     ctx + (size_t)user * p->user_ctx_len, doc};
        size_t n = assemble(p, r, docs, seg_of, tok, sens);
        uint32_t dec =
            p->decode_min + (uint32_t)gsl_rng_uniform_int(r, p->decode_max - p->decode_min + 1);
        rc = wl_add(w, (uint64_t)llround(t_s * 1e9), tenant, user, dec, tok, sens, (uint32_t)n, e);
    }
out:
    if (docs)
        gsl_ran_discrete_free(docs);
    if (r)
        gsl_rng_free(r);
    free(seg);
    free(tok);
    free(sens);
    free(wdoc);
    return rc;
}

/* ---- replay files ----------------------------------------------------------------------- */

static int next_word(char **p, char **start)
{
    while (**p == ' ' || **p == '\t' || **p == '\r' || **p == '\n')
        (*p)++;
    if (!**p)
        return 0;
    *start = *p;
    while (**p && **p != ' ' && **p != '\t' && **p != '\r' && **p != '\n')
        (*p)++;
    if (**p)
        *(*p)++ = '\0';
    return 1;
}

typedef struct rd_buf {
    uint32_t *tok;
    uint8_t *sens;
    size_t n, cap;
} rd_buf;

static int rd_push(rd_buf *b, uint32_t t, uint8_t s)
{
    size_t cap = b->cap;
    if (grow((void **)&b->tok, &cap, b->n + 1, sizeof *b->tok) ||
        grow((void **)&b->sens, &b->cap, b->n + 1, 1))
        return -1;
    b->tok[b->n] = t;
    b->sens[b->n++] = s;
    return 0;
}

/* Parses one "req …" line (after the keyword) into the workload. */
static int read_req(workload *w, char *line, char *p, const char *path, int ln, rd_buf *b,
                    uint64_t *last, errbuf *e)
{
    unsigned long long v[4];
    static const char *const what[4] = {"arrival_ns", "tenant", "user", "decode_len"};
    char *s = p, *arrival = p;
    for (int k = 0; k < 4; k++) {
        int got = next_word(&p, &s);
        if (!got || parse_u64(s, &v[k]) || (k && v[k] > UINT32_MAX))
            return err_set(e, MS_ERR_FORMAT,
                           "%s:%d:%d: error: expected %s (an unsigned integer)\n"
                           "  hint: req <arrival_ns> <tenant> <user> <decode_len> : <tokens…>",
                           path, ln, (int)((got ? s : p) - line) + 1, what[k]);
        if (k == 0)
            arrival = s;
    }
    if (v[0] < *last)
        return err_set(e, MS_ERR_FORMAT,
                       "%s:%d:%d: error: arrival %llu is before the previous "
                       "request's %llu\n  hint: sort requests by arrival time",
                       path, ln, (int)(arrival - line) + 1, v[0], (unsigned long long)*last);
    char *colon = p;
    if (!next_word(&p, &colon) || strcmp(colon, ":"))
        return err_set(e, MS_ERR_FORMAT, "%s:%d:%d: error: expected ':' before the tokens", path,
                       ln, (int)(colon - line) + 1);
    b->n = 0;
    while (next_word(&p, &s)) {
        uint8_t sen = *s == '!';
        unsigned long long t;
        if (parse_u64(s + sen, &t) || t > UINT32_MAX)
            return err_set(e, MS_ERR_FORMAT,
                           "%s:%d:%d: error: bad token '%s'\n  hint: a token "
                           "is an id, or !id when it is sensitive",
                           path, ln, (int)(s - line) + 1, s);
        if (rd_push(b, (uint32_t)t, sen))
            return err_set(e, MS_ERR_NOMEM, "out of memory reading %s", path);
    }
    errbuf sub;
    int rc = wl_add(w, v[0], (uint32_t)v[1], (uint32_t)v[2], (uint32_t)v[3], b->tok, b->sens,
                    (uint32_t)b->n, &sub);
    if (rc)
        return err_set(e, rc, "%s:%d:1: error: %.400s", path, ln, sub.msg);
    *last = v[0];
    return MS_OK;
}

/* A replay file's lines, read in chunks of WL_CHUNK: unread bytes are buf[start, len). */
#define WL_CHUNK 65536
typedef struct wl_lines {
    FILE *f;
    char *buf;
    size_t cap, start, len;
    uint64_t total; /* bytes read */
} wl_lines;

/* The next line of r (its newline replaced by the end of the string) in *line, at most
 * WL_LINE_MAX bytes: 1 if a line was read, 0 at the end, -1 past a bound (a line longer than
 * WL_LINE_MAX, or WL_FILE_MAX in all: /dev/zero, or not a workload file), -2 out of memory. */
static int next_line(wl_lines *r, char **line)
{
    size_t scanned = r->start;
    for (;;) {
        char *nl = r->len > scanned ? memchr(r->buf + scanned, '\n', r->len - scanned) : NULL;
        if (nl) {
            *nl = '\0';
            *line = r->buf + r->start;
            r->start = (size_t)(nl - r->buf) + 1;
            return 1;
        }
        if (r->len - r->start > WL_LINE_MAX)
            return -1;
        scanned = r->len;
        if (r->cap - r->len < WL_CHUNK + 1) { /* room for a chunk and the string's end */
            size_t keep = r->len - r->start;
            if (keep && r->start)
                memmove(r->buf, r->buf + r->start, keep);
            scanned -= r->start;
            r->len = keep;
            r->start = 0;
            if (r->cap - r->len < WL_CHUNK + 1) {
                size_t nc = r->cap ? 2 * r->cap : 4 * WL_CHUNK;
                nc = nc < r->len + WL_CHUNK + 1 ? r->len + WL_CHUNK + 1 : nc;
                char *nb = realloc(r->buf, nc);
                if (!nb)
                    return -2;
                r->buf = nb;
                r->cap = nc;
            }
        }
        size_t got = fread(r->buf + r->len, 1, WL_CHUNK, r->f);
        if (!got) { /* the end: a last line without a newline, or none */
            if (r->len == r->start)
                return 0;
            r->buf[r->len] = '\0';
            *line = r->buf + r->start;
            r->start = r->len;
            return 1;
        }
        r->len += got;
        if ((r->total += got) > WL_FILE_MAX)
            return -1;
    }
}

int wl_read(workload *w, FILE *f, const char *path, errbuf *e)
{
    char *line = NULL;
    wl_lines lines = {.f = f};
    int ln = 0, rc = MS_OK, header = 0, got;
    uint64_t last = 0;
    rd_buf b = {0};
    while (!rc && (got = next_line(&lines, &line)) != 0) {
        ln++;
        if (got < 0) {
            rc = got == -2 ? err_set(e, MS_ERR_NOMEM, "%s: out of memory", path)
                 : lines.total > WL_FILE_MAX
                     ? err_set(e, MS_ERR_FORMAT, "%s:%d:1: error: file larger than %llu GiB", path,
                               ln, WL_FILE_MAX >> 30)
                     : err_set(e, MS_ERR_FORMAT,
                               "%s:%d:1: error: line longer than %u MiB (not a workload file?)",
                               path, ln, WL_LINE_MAX >> 20);
            break;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *p = line, *word;
        if (!next_word(&p, &word))
            continue;
        if (!header) {
            char *ver;
            unsigned long long v = 0;
            if (strcmp(word, WL_FORMAT) || !next_word(&p, &ver) || parse_u64(ver, &v) ||
                v != WL_FORMAT_VERSION)
                rc = err_set(e, MS_ERR_FORMAT,
                             "%s:%d:1: error: not a workload file (expected "
                             "'%s %d')\n  ---> HINT: write one with `mpcsim serve … "
                             "--dump-workload FILE`",
                             path, ln, WL_FORMAT, WL_FORMAT_VERSION);
            header = 1;
        } else if (!strcmp(word, "req")) {
            rc = read_req(w, line, p, path, ln, &b, &last, e);
        } else {
            rc = err_set(e, MS_ERR_FORMAT,
                         "%s:%d:%d: error: unknown record '%s' (expected "
                         "'req')",
                         path, ln, (int)(word - line) + 1, word);
        }
    }
    if (!rc && ferror(f))
        rc = err_set(e, MS_ERR_IO, "%s: read error: %s", path, strerror(errno));
    if (!rc && w->n == 0)
        rc = err_set(e, MS_ERR_FORMAT,
                     "%s:%d:1: error: no requests\n  hint: add lines "
                     "'req <arrival_ns> <tenant> <user> <decode_len> : <tokens…>'",
                     path, ln + 1);
    free(lines.buf);
    free(b.tok);
    free(b.sens);
    return rc;
}

int wl_load(workload *w, const char *path, errbuf *e)
{
    /* non-blocking open: a FIFO is refused below, not waited on */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return err_set(e, errno == ENOENT ? MS_ERR_NOTFOUND : MS_ERR_IO, "%s: cannot open: %s",
                       path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > WL_FILE_MAX) {
        int reg = S_ISREG(st.st_mode);
        close(fd);
        if (!reg)
            return err_set(e, MS_ERR_FORMAT, "%s: error: not a regular file", path);
        return err_set(e, MS_ERR_FORMAT,
                       "%s: error: file of %llu bytes, larger than the %llu bytes this reader "
                       "takes",
                       path, (unsigned long long)st.st_size, (unsigned long long)WL_FILE_MAX);
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "r");
    if (!f) {
        close(fd);
        return err_set(e, MS_ERR_NOMEM, "%s: out of memory", path);
    }
    int rc = wl_read(w, f, path, e);
    fclose(f);
    return rc;
}

int wl_write(const workload *w, FILE *f)
{
    fprintf(f,
            "%s %d\n# req <arrival_ns> <tenant> <user> <decode_len> : <tokens> (!id = "
            "sensitive)\n",
            WL_FORMAT, WL_FORMAT_VERSION);
    for (size_t i = 0; i < w->n; i++) {
        const wl_request *r = &w->req[i];
        fprintf(f, "req %llu %u %u %u :", (unsigned long long)r->arrival_ns, r->tenant, r->user,
                r->decode_len);
        const uint32_t *t = wl_tok(w, i);
        const uint8_t *s = wl_sens(w, i);
        for (uint32_t j = 0; j < r->n_tokens; j++)
            fprintf(f, s[j] ? " !%u" : " %u", t[j]);
        fputc('\n', f);
    }
    return ferror(f) ? MS_ERR_IO : MS_OK;
}
