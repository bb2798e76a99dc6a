/* op.c — the op program: storage, names, text form. */
#include "op.h"

#include <stdlib.h>
#include <string.h>

/* ---- names ------------------------------------------------------------------------------ */

static const char *const kind_names[] = {
#define X(e, s, c) s,
    OP_KINDS(X)
#undef X
};
static const op_shape_class kind_shapes[] = {
#define X(e, s, c) OPS_##c,
    OP_KINDS(X)
#undef X
};
static const char *const cat_names[] = {
#define X(e, s) s,
    OP_CATS(X)
#undef X
};
static const char *const phase_names[] = {"prefill", "decode"};
static const char *const role_names[] = {"temp", "input", "weight", "cache", "public", "output"};

const char *op_kind_name(int k) { return (k >= 0 && k < OP_N_KINDS) ? kind_names[k] : "?"; }
const char *op_cat_name(int c) { return (c >= 0 && c < OPC_N) ? cat_names[c] : "?"; }
const char *op_phase_name(int p) { return (p >= 0 && p < PHASE_N) ? phase_names[p] : "?"; }
const char *op_role_name(int r) { return (r >= 0 && r < OPT_N_ROLES) ? role_names[r] : "?"; }
op_shape_class op_kind_shape(int k) { return (k >= 0 && k < OP_N_KINDS) ? kind_shapes[k] : OPS_EW; }

static int find_name(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0)
            return i;
    return -1;
}

int op_kind_from_name(const char *s) { return find_name(kind_names, OP_N_KINDS, s); }
int op_cat_from_name(const char *s) { return find_name(cat_names, OPC_N, s); }
int op_phase_from_name(const char *s) { return find_name(phase_names, PHASE_N, s); }
static int role_from_name(const char *s) { return find_name(role_names, OPT_N_ROLES, s); }

/* ---- storage ----------------------------------------------------------------------------- */

void op_program_init(op_program *p) { memset(p, 0, sizeof *p); }

void op_program_free(op_program *p)
{
    free(p->ops);
    free(p->tens);
    memset(p, 0, sizeof *p);
}

void op_program_clear(op_program *p)
{
    p->n_ops = 0;
    p->n_tens = 0;
    p->model[0] = '\0';
}

static int grow(void **buf, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 64;
    while (nc < need)
        nc *= 2;
    void *nb = realloc(*buf, nc * elem);
    if (!nb)
        return -1;
    *buf = nb;
    *cap = nc;
    return 0;
}

uint32_t op_tensor_add(op_program *p, const char *name, op_role role, op_dom dom, uint32_t batch,
                       uint32_t rows, uint32_t cols)
{
    if (grow((void **)&p->tens, &p->cap_tens, p->n_tens + 1, sizeof *p->tens))
        return OP_NONE;
    op_tensor *t = &p->tens[p->n_tens];
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, strnlen(name, sizeof t->name - 1)); /* cut as snprintf; NUL from memset */
    t->role = (uint8_t)role;
    t->dom = (uint8_t)dom;
    t->batch = batch;
    t->rows = rows;
    t->cols = cols;
    return (uint32_t)p->n_tens++;
}

uint32_t op_tensor_find(const op_program *p, const char *name)
{
    for (size_t i = 0; i < p->n_tens; i++)
        if (strcmp(p->tens[i].name, name) == 0)
            return (uint32_t)i;
    return OP_NONE;
}

void op_layer_name(char full[48], int layer, const char *name)
{
    size_t o = 0;
    if (layer >= 0) { /* by hand: the lowering names every tensor of a 32-layer step */
        char d[12];
        int nd = 0;
        unsigned v = (unsigned)layer;
        do {
            d[nd++] = (char)('0' + v % 10);
            v /= 10;
        } while (v);
        full[o++] = 'L';
        while (nd)
            full[o++] = d[--nd];
        full[o++] = '.';
    }
    while (*name && o < 47)
        full[o++] = *name++;
    full[o] = '\0';
}

uint32_t op_layer_find(const op_program *p, int layer, const char *name)
{
    char full[48];
    op_layer_name(full, layer, name);
    return op_tensor_find(p, full);
}

int op_input_owner(const op_program *p, const op *o, int n_parties)
{
    int role = p->tens[o->out].role;
    if (role == OPT_INPUT)
        return 0;
    if (role == OPT_WEIGHT)
        return 1;
    return (o->iarg >= 0 && o->iarg < n_parties) ? o->iarg : 0;
}

int op_layer_of(const char *full, const char **rest)
{
    if (full[0] != 'L' || full[1] < '0' || full[1] > '9')
        return -1;
    long l = 0;
    const char *c = full + 1;
    for (; *c >= '0' && *c <= '9' && l < 1000000; c++)
        l = l * 10 + (*c - '0');
    if (*c != '.')
        return -1;
    if (rest)
        *rest = c + 1;
    return (int)l;
}

long op_emit(op_program *p, const op *o)
{
    if (grow((void **)&p->ops, &p->cap_ops, p->n_ops + 1, sizeof *p->ops))
        return -1;
    p->ops[p->n_ops] = *o;
    return (long)p->n_ops++;
}

uint64_t op_out_elems(const op *o) { return (uint64_t)o->batch * o->m * o->n; }

uint64_t op_macs(const op *o)
{
    if (op_kind_shape(o->kind) != OPS_MM)
        return 0;
    return (uint64_t)o->batch * o->m * o->k * o->n;
}

int op_program_is_sane(const op_program *p)
{
    for (size_t i = 0; i < p->n_ops; i++) {
        const op *o = &p->ops[i];
        if (o->kind >= OP_N_KINDS || o->cat >= OPC_N || o->phase >= PHASE_N)
            return 0;
        for (int j = 0; j < 3; j++)
            if (o->in[j] != OP_NONE && o->in[j] >= p->n_tens)
                return 0;
        if (o->out != OP_NONE && o->out >= p->n_tens)
            return 0;
        if (o->batch == 0 || o->m == 0 || o->n == 0)
            return 0;
        if (op_kind_shape(o->kind) == OPS_MM && o->k == 0)
            return 0;
    }
    return 1;
}

/* ---- text form ---------------------------------------------------------------------------- */

static void write_id(FILE *f, uint32_t id)
{
    if (id == OP_NONE)
        fputc('-', f);
    else
        fprintf(f, "%u", id);
}

int op_write(const op_program *p, FILE *f)
{
    fprintf(f, "mpcsim-op-program 1\n");
    fprintf(f, "model %s\n", p->model[0] ? p->model : "-");
    fprintf(f, "# tensor <id> <name> <role> <dom> <batch> <rows> <cols>\n");
    for (size_t i = 0; i < p->n_tens; i++) {
        const op_tensor *t = &p->tens[i];
        fprintf(f, "tensor %zu %s %s %s %u %u %u\n", i, t->name, op_role_name(t->role),
                t->dom == DOM_BOOL ? "bool" : "arith", t->batch, t->rows, t->cols);
    }
    fprintf(f,
            "# op <idx> <kind> <phase> <cat> <layer> <group> b= m= k= n= in= out= flags= i= f=\n");
    for (size_t i = 0; i < p->n_ops; i++) {
        const op *o = &p->ops[i];
        fprintf(f, "op %zu %s %s %s %d %d b=%u m=%u k=%u n=%u in=", i, op_kind_name(o->kind),
                op_phase_name(o->phase), op_cat_name(o->cat), o->layer, o->group, o->batch, o->m,
                o->k, o->n);
        for (int j = 0; j < 3; j++) {
            if (j)
                fputc(',', f);
            write_id(f, o->in[j]);
        }
        fputs(" out=", f);
        write_id(f, o->out);
        fprintf(f, " flags=%x i=%d f=%.17g", o->flags, o->iarg, o->farg);
        if (o->bits)
            fprintf(f, " w=%u", o->bits);
        fputc('\n', f);
    }
    return ferror(f) ? MS_ERR_IO : MS_OK;
}

static int parse_id(const char *s, uint32_t *out)
{
    unsigned long long v;
    if (strcmp(s, "-") == 0) {
        *out = OP_NONE;
        return 0;
    }
    if (parse_u64(s, &v) || v >= OP_NONE)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

static int parse_u32(const char *s, uint32_t *out)
{
    unsigned long long v;
    if (parse_u64(s, &v) || v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

/* Splits a line in place into at most max whitespace-separated words. */
/* The line's words in w[0..max); -1 if it has more (nothing is dropped silently). */
static int split(char *line, char **w, int max)
{
    int n = 0;
    for (char *s = strtok(line, " \t\r\n"); s; s = strtok(NULL, " \t\r\n")) {
        if (n == max)
            return -1;
        w[n++] = s;
    }
    return n;
}

static int read_tensor(op_program *p, char **w, int nw)
{
    uint32_t id, b, r, c;
    int role = nw == 8 ? role_from_name(w[3]) : -1;
    if (role < 0 || parse_id(w[1], &id) || id != p->n_tens || parse_u32(w[5], &b) ||
        parse_u32(w[6], &r) || parse_u32(w[7], &c))
        return -1;
    int dom = strcmp(w[4], "bool") == 0 ? DOM_BOOL : strcmp(w[4], "arith") == 0 ? DOM_ARITH : -1;
    if (dom < 0)
        return -1;
    return op_tensor_add(p, w[2], (op_role)role, (op_dom)dom, b, r, c) == OP_NONE ? -1 : 0;
}

static int read_kv(op *o, const char *key, const char *val)
{
    long long iv;
    if (!strcmp(key, "b"))
        return parse_u32(val, &o->batch);
    if (!strcmp(key, "m"))
        return parse_u32(val, &o->m);
    if (!strcmp(key, "k"))
        return parse_u32(val, &o->k);
    if (!strcmp(key, "n"))
        return parse_u32(val, &o->n);
    if (!strcmp(key, "out"))
        return parse_id(val, &o->out);
    if (!strcmp(key, "flags")) {
        char *end;
        unsigned long v = strtoul(val, &end, 16);
        if (*end || end == val)
            return -1;
        o->flags = (uint32_t)v;
        return 0;
    }
    if (!strcmp(key, "i")) {
        if (parse_i64(val, &iv) || iv < INT32_MIN || iv > INT32_MAX)
            return -1;
        o->iarg = (int32_t)iv;
        return 0;
    }
    if (!strcmp(key, "f"))
        return parse_double(val, &o->farg);
    if (!strcmp(key, "w")) { /* bit bound: 1 … 64 */
        if (parse_i64(val, &iv) || iv < 1 || iv > 64)
            return -1;
        o->bits = (uint8_t)iv;
        return 0;
    }
    if (!strcmp(key, "in")) {
        char buf[64], *ids[3];
        snprintf(buf, sizeof buf, "%s", val);
        int n = 0;
        for (char *s = strtok(buf, ","); s && n < 3; s = strtok(NULL, ","))
            ids[n++] = s;
        if (n != 3)
            return -1;
        for (int j = 0; j < 3; j++)
            if (parse_id(ids[j], &o->in[j]))
                return -1;
        return 0;
    }
    return -1;
}

static int read_op(op_program *p, char **w, int nw)
{
    op o;
    long long layer, group;
    uint32_t idx;
    memset(&o, 0, sizeof o);
    if (nw < 7 || parse_id(w[1], &idx) || idx != p->n_ops)
        return -1;
    int kind = op_kind_from_name(w[2]), phase = op_phase_from_name(w[3]);
    int cat = op_cat_from_name(w[4]);
    if (kind < 0 || phase < 0 || cat < 0 || parse_i64(w[5], &layer) || parse_i64(w[6], &group))
        return -1;
    o.kind = (uint16_t)kind;
    o.phase = (uint8_t)phase;
    o.cat = (uint8_t)cat;
    o.layer = (int16_t)layer;
    o.group = (int16_t)group;
    o.in[0] = o.in[1] = o.in[2] = o.out = OP_NONE;
    for (int i = 7; i < nw; i++) {
        char *eq = strchr(w[i], '=');
        if (!eq)
            return -1;
        *eq = '\0';
        if (read_kv(&o, w[i], eq + 1))
            return -1;
    }
    return op_emit(p, &o) < 0 ? -1 : 0;
}

/* An op line has 17 words (op, idx, kind, phase, cat, layer, group, b= m= k= n= in= out=
 * flags= i= f= and w=); room for a few more keys. */
#define OP_LINE_WORDS 24

int op_read(op_program *p, FILE *f, const char *path, errbuf *e)
{
    char line[1024], *w[OP_LINE_WORDS];
    int lineno = 0, seen_header = 0;
    op_program_clear(p);
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        int nw = split(line, w, OP_LINE_WORDS);
        if (nw < 0)
            return err_set(e, MS_ERR_FORMAT, "%s:%d: error: more than %d fields on a line", path,
                           lineno, OP_LINE_WORDS);
        if (nw == 0)
            continue;
        int bad = 0;
        if (!seen_header) {
            if (nw != 2 || strcmp(w[0], "mpcsim-op-program") != 0)
                return err_set(e, MS_ERR_FORMAT,
                               "%s:%d: error: not an op program (expected 'mpcsim-op-program 1')\n"
                               "  hint: write one with 'mpcsim cost --dump-program FILE'",
                               path, lineno);
            if (strcmp(w[1], "1") != 0)
                return err_set(
                    e, MS_ERR_FORMAT,
                    "%s:%d: error: op program format version %s, this mpcsim reads 1\n"
                    "  hint: regenerate it with this version's 'mpcsim cost --dump-program'",
                    path, lineno, w[1]);
            seen_header = 1;
        } else if (!strcmp(w[0], "model") && nw == 2) {
            snprintf(p->model, sizeof p->model, "%s", strcmp(w[1], "-") ? w[1] : "");
        } else if (!strcmp(w[0], "tensor")) {
            bad = read_tensor(p, w, nw);
        } else if (!strcmp(w[0], "op")) {
            bad = read_op(p, w, nw);
        } else {
            bad = 1;
        }
        if (bad)
            return err_set(e, MS_ERR_FORMAT, "%s:%d: error: malformed '%s' line", path, lineno,
                           w[0]);
    }
    if (!seen_header)
        return err_set(e, MS_ERR_FORMAT, "%s: error: empty op program", path);
    if (!op_program_is_sane(p))
        return err_set(e, MS_ERR_FORMAT,
                       "%s: error: op program refers to missing tensors or has empty shapes", path);
    return MS_OK;
}
