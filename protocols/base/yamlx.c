/* yamlx.c — libyaml events → a node tree with marks, duplicate keys rejected, aliases copied. */
#include "yamlx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

/* ---- nodes ------------------------------------------------------------------------------- */

yx_node *yx_new(int kind, int line, int col)
{
    yx_node *n = calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->kind = kind;
    n->line = line;
    n->col = col;
    return n;
}

yx_node *yx_new_scalar(const char *s, int quoted, int line, int col)
{
    yx_node *n = yx_new(YX_SCALAR, line, col);
    if (!n)
        return NULL;
    n->str = strdup(s ? s : "");
    if (!n->str) {
        free(n);
        return NULL;
    }
    n->quoted = quoted;
    return n;
}

int yx_push(yx_node *parent, yx_node *key, yx_node *item)
{
    if ((parent->n & (parent->n - 1)) == 0) { /* grow at powers of two */
        size_t cap = parent->n ? parent->n * 2 : 4;
        yx_node **it = realloc(parent->item, cap * sizeof *it);
        if (!it)
            return MS_ERR_NOMEM;
        parent->item = it;
        if (parent->kind == YX_MAP) {
            yx_node **k = realloc(parent->key, cap * sizeof *k);
            if (!k)
                return MS_ERR_NOMEM;
            parent->key = k;
        }
    }
    if (parent->kind == YX_MAP)
        parent->key[parent->n] = key;
    parent->item[parent->n++] = item;
    return MS_OK;
}

void yx_free(yx_node *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->n; i++) {
        if (n->key)
            yx_free(n->key[i]);
        yx_free(n->item[i]);
    }
    free(n->item);
    free(n->key);
    free(n->str);
    free(n);
}

yx_node *yx_clone(const yx_node *n)
{
    yx_node *c = n->kind == YX_SCALAR ? yx_new_scalar(n->str, n->quoted, n->line, n->col)
                                      : yx_new(n->kind, n->line, n->col);
    if (!c)
        return NULL;
    for (size_t i = 0; i < n->n; i++) {
        yx_node *k = n->kind == YX_MAP ? yx_clone(n->key[i]) : NULL;
        yx_node *v = yx_clone(n->item[i]);
        if ((n->kind == YX_MAP && !k) || !v || yx_push(c, k, v)) {
            yx_free(k);
            yx_free(v);
            yx_free(c);
            return NULL;
        }
    }
    return c;
}

const yx_node *yx_map_get(const yx_node *m, const char *key)
{
    if (!m || m->kind != YX_MAP)
        return NULL;
    for (size_t i = 0; i < m->n; i++)
        if (!strcmp(m->key[i]->str, key))
            return m->item[i];
    return NULL;
}

int yx_is_null(const yx_node *n)
{
    if (!n || n->kind != YX_SCALAR || n->quoted)
        return 0;
    const char *s = n->str;
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

const char *yx_kind_name(const yx_node *n)
{
    if (!n)
        return "nothing";
    if (n->kind == YX_MAP)
        return "a mapping";
    if (n->kind == YX_SEQ)
        return "a list";
    return yx_is_null(n) ? "an empty value" : "a scalar";
}

/* ---- parsing ----------------------------------------------------------------------------- */

#define YX_MAX_DEPTH 64
#define YX_MAX_ANCHORS 256
#define YX_MAX_NODES 100000     /* nodes in one tree, aliases' copies counted */
#define YX_MAX_FILE (64u << 20) /* bytes read from one file */

typedef struct yx_builder {
    const char *path;
    yx_node *stack[YX_MAX_DEPTH];
    yx_node *pending_key[YX_MAX_DEPTH]; /* mapping at that level waiting for its value */
    int depth;
    yx_node *root;
    int n_docs;
    struct {
        char *name;
        yx_node *node;
    } anchor[YX_MAX_ANCHORS];
    int n_anchor;
    size_t n_nodes; /* nodes made so far, copies included */
    errbuf *e;
} yx_builder;

static size_t tree_size(const yx_node *n, size_t stop)
{
    size_t k = 1;
    for (size_t i = 0; i < n->n && k <= stop; i++)
        k += (n->key ? tree_size(n->key[i], stop) : 0) + tree_size(n->item[i], stop);
    return k;
}

static int bad(yx_builder *b, const yaml_mark_t *m, const char *fmt, const char *arg,
               const char *hint)
{
    char what[512];
    snprintf(what, sizeof what, fmt, arg);
    return err_set(b->e, MS_ERR_INPUT, "%s:%zu:%zu: error: %s\n  hint: %s", b->path, m->line + 1,
                   m->column + 1, what, hint);
}

static int remember_anchor(yx_builder *b, const yaml_char_t *name, yx_node *n, const yaml_mark_t *m)
{
    if (!name)
        return MS_OK;
    if (b->n_anchor == YX_MAX_ANCHORS)
        return bad(b, m, "more than %s anchors", "256", "use fewer anchors (&name)");
    b->anchor[b->n_anchor].name = strdup((const char *)name);
    if (!b->anchor[b->n_anchor].name)
        return MS_ERR_NOMEM;
    b->anchor[b->n_anchor++].node = n;
    return MS_OK;
}

/* Attaches a finished node to the container on top of the stack (or makes it the root). */
static int attach(yx_builder *b, yx_node *n, const yaml_mark_t *m)
{
    if (b->depth == 0) {
        b->root = n;
        return MS_OK;
    }
    yx_node *top = b->stack[b->depth - 1];
    if (top->kind == YX_SEQ)
        return yx_push(top, NULL, n);
    yx_node *k = b->pending_key[b->depth - 1];
    if (!k) { /* n is a key */
        if (n->kind != YX_SCALAR) {
            int rc = bad(b, m, "a key must be a plain word, not %s", yx_kind_name(n),
                         "write 'key: value' with a scalar key");
            yx_free(n);
            return rc;
        }
        for (size_t i = 0; i < top->n; i++)
            if (!strcmp(top->key[i]->str, n->str)) {
                char first[64];
                snprintf(first, sizeof first, "line %d:%d", top->key[i]->line, top->key[i]->col);
                int rc = err_set(b->e, MS_ERR_INPUT,
                                 "%s:%d:%d: error: duplicate key '%s' (first defined at %s)\n"
                                 "  hint: keep one of them; a key may appear once per mapping",
                                 b->path, n->line, n->col, n->str, first);
                yx_free(n);
                return rc;
            }
        b->pending_key[b->depth - 1] = n;
        return MS_OK;
    }
    b->pending_key[b->depth - 1] = NULL;
    int rc = yx_push(top, k, n);
    if (rc)
        yx_free(k);
    return rc;
}

static int count_nodes(yx_builder *b, size_t k, const yaml_mark_t *m)
{
    if (k > YX_MAX_NODES - b->n_nodes)
        return bad(b, m, "the document grows past %s nodes (aliases count as copies)", "100000",
                   "expand fewer aliases (*name); a file this large is not an mpcsim input");
    b->n_nodes += k;
    return MS_OK;
}

static int open_node(yx_builder *b, int kind, const yaml_mark_t *m, const yaml_char_t *anchor)
{
    int rc = count_nodes(b, 1, m);
    if (rc)
        return rc;
    if (b->depth == YX_MAX_DEPTH)
        return bad(b, m, "nesting deeper than %s levels", "64", "flatten the file");
    yx_node *n = yx_new(kind, (int)m->line + 1, (int)m->column + 1);
    if (!n)
        return MS_ERR_NOMEM;
    rc = remember_anchor(b, anchor, n, m);
    if (rc) {
        yx_free(n);
        return rc;
    }
    b->pending_key[b->depth] = NULL;
    b->stack[b->depth++] = n;
    return MS_OK;
}

static int on_alias(yx_builder *b, const yaml_event_t *ev)
{
    const char *name = (const char *)ev->data.alias.anchor;
    const yaml_mark_t *m = &ev->start_mark;
    for (int i = b->n_anchor - 1; i >= 0; i--) {
        if (strcmp(b->anchor[i].name, name))
            continue;
        for (int d = 0; d < b->depth; d++)
            if (b->stack[d] == b->anchor[i].node)
                return bad(b, m, "alias '*%s' refers to a node that contains it", name,
                           "an alias cannot point into its own anchor");
        int rc = count_nodes(b, tree_size(b->anchor[i].node, YX_MAX_NODES), m);
        if (rc)
            return rc;
        yx_node *c = yx_clone(b->anchor[i].node);
        if (!c)
            return MS_ERR_NOMEM;
        return attach(b, c, m);
    }
    return bad(b, m, "unknown alias '*%s'", name, "define the anchor (&name) before using it");
}

static int on_event(yx_builder *b, const yaml_event_t *ev)
{
    const yaml_mark_t *m = &ev->start_mark;
    switch (ev->type) {
    case YAML_DOCUMENT_START_EVENT:
        if (++b->n_docs > 1)
            return bad(b, m, "%s", "a second YAML document ('---') in one file",
                       "put one scenario per file");
        return MS_OK;
    case YAML_SCALAR_EVENT: {
        if (count_nodes(b, 1, m))
            return MS_ERR_INPUT;
        yx_node *n = yx_new_scalar((const char *)ev->data.scalar.value,
                                   ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE,
                                   (int)m->line + 1, (int)m->column + 1);
        if (!n)
            return MS_ERR_NOMEM;
        int rc = remember_anchor(b, ev->data.scalar.anchor, n, m);
        if (rc) {
            yx_free(n);
            return rc;
        }
        return attach(b, n, m);
    }
    case YAML_SEQUENCE_START_EVENT: return open_node(b, YX_SEQ, m, ev->data.sequence_start.anchor);
    case YAML_MAPPING_START_EVENT: return open_node(b, YX_MAP, m, ev->data.mapping_start.anchor);
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT: {
        yx_node *n = b->stack[--b->depth];
        return attach(b, n, m);
    }
    case YAML_ALIAS_EVENT: return on_alias(b, ev);
    default: return MS_OK;
    }
}

static void builder_free(yx_builder *b)
{
    for (int i = 0; i < b->n_anchor; i++)
        free(b->anchor[i].name);
    /* Unfinished containers (after an error) are not attached to their parents yet. */
    for (int d = b->depth - 1; d >= 0; d--) {
        yx_free(b->pending_key[d]);
        yx_free(b->stack[d]);
    }
}

int yx_parse(const char *path, const char *text, size_t len, yx_node **root, errbuf *e)
{
    yaml_parser_t p;
    yx_builder *b = calloc(1, sizeof *b);
    *root = NULL;
    if (!b || !yaml_parser_initialize(&p)) {
        free(b);
        return err_set(e, MS_ERR_NOMEM, "%s: out of memory", path);
    }
    b->path = path;
    b->e = e;
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int rc = MS_OK, done = 0;
    while (!rc && !done) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            const yaml_mark_t *m = p.problem ? &p.problem_mark : &p.mark;
            char ctx[256] = "";
            if (p.context)
                snprintf(ctx, sizeof ctx, " (%s that began at %zu:%zu)", p.context,
                         p.context_mark.line + 1, p.context_mark.column + 1);
            rc = err_set(e, MS_ERR_INPUT,
                         "%s:%zu:%zu: error: %s%s\n"
                         "  hint: check the indentation, a missing ':' or ',', or an unclosed "
                         "quote or bracket",
                         path, m->line + 1, m->column + 1, p.problem ? p.problem : "bad YAML", ctx);
            break;
        }
        rc = on_event(b, &ev);
        done = ev.type == YAML_STREAM_END_EVENT;
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    if (rc) {
        yx_free(b->root);
        builder_free(b);
        free(b);
        return rc == MS_ERR_NOMEM ? err_set(e, rc, "%s: out of memory", path) : rc;
    }
    *root = b->root ? b->root : yx_new(YX_MAP, 1, 1);
    builder_free(b);
    free(b);
    return *root ? MS_OK : err_set(e, MS_ERR_NOMEM, "%s: out of memory", path);
}

int yx_parse_file(const char *path, yx_node **root, errbuf *e)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return err_set(e, MS_ERR_IO, "%s: error: cannot open file", path);
    return yx_parse_fp(path, f, root, e);
}

int yx_parse_fp(const char *path, FILE *f, yx_node **root, errbuf *e)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return err_set(e, MS_ERR_NOMEM, "%s: out of memory", path);
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
        if (len > YX_MAX_FILE) {
            free(buf);
            fclose(f);
            return err_set(e, MS_ERR_INPUT,
                           "%s: error: larger than %u MiB; not an mpcsim input file\n"
                           "  hint: check that the path names a YAML file",
                           path, YX_MAX_FILE >> 20);
        }
    }
    int io = ferror(f);
    fclose(f);
    if (io) {
        free(buf);
        return err_set(e, MS_ERR_IO, "%s: error: read failed", path);
    }
    int rc = yx_parse(path, buf, len, root, e);
    free(buf);
    return rc;
}
