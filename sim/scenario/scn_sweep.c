/* scn_sweep.c — a scenario's sweep: every list a set of alternatives, expanded into runs
 * (grid or zip). Part of the scenario reader (scn.c; shared declarations in scn_int.h). */
#include "scn_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <libgen.h>
#include <sys/stat.h>

#include "sim/policy/policy.h"
#include "sim/trace/trace.h"
#include "protocols/base/yamlx.h"
#include "protocols/base/yschema.h"

/* ---- sweep expansion ----------------------------------------------------------------------
 * Every list is a set of alternatives. expand() turns a node into its variants: trees without
 * lists. A mapping combines its children's variants: grid = cartesian product (first key
 * slowest), zip = lock-step (counts equal, or 1). A list concatenates its items' variants. */

static yx_node *made_map(scn_ctx *x, const yx_node *like)
{
    if (x->n_made == x->cap_made) {
        size_t cap = x->cap_made ? x->cap_made * 2 : 64;
        yx_node **m = realloc(x->made, cap * sizeof *m);
        if (!m)
            return NULL;
        x->made = m;
        x->cap_made = cap;
    }
    yx_node *n = yx_new(YX_MAP, like->line, like->col);
    if (n)
        x->made[x->n_made++] = n;
    return n;
}

void made_free(scn_ctx *x)
{
    for (size_t i = 0; i < x->n_made; i++) {
        free(x->made[i]->item);
        free(x->made[i]->key);
        free(x->made[i]);
    }
    free(x->made);
    x->made = NULL;
    x->n_made = x->cap_made = 0;
}

int xset_push(xset *s, const yx_node *n)
{
    if ((s->n & (s->n - 1)) == 0) {
        const yx_node **v = realloc(s->v, (s->n ? s->n * 2 : 4) * sizeof *v);
        if (!v)
            return MS_ERR_NOMEM;
        s->v = v;
    }
    s->v[s->n++] = n;
    return MS_OK;
}

int expand(scn_ctx *x, const yx_node *n, xset *out);

static int expand_seq(scn_ctx *x, const yx_node *n, xset *out)
{
    if (n->n == 0)
        return fail(x, n, "give at least one value, or remove the key",
                    "empty list: a sweep over no values has no runs");
    for (size_t i = 0; i < n->n; i++) {
        if (n->item[i]->kind == YX_SEQ)
            return fail(x, n->item[i], "write the values in one flat list", "a list inside a list");
        xset sub = {0};
        int rc = expand(x, n->item[i], &sub);
        for (size_t j = 0; !rc && j < sub.n; j++)
            rc = xset_push(out, sub.v[j]);
        free(sub.v);
        if (rc)
            return rc;
        if (out->n > SCN_MAX_RUNS)
            return fail(x, n, "split the sweep into several files",
                        "the sweep expands to more than %d runs", SCN_MAX_RUNS);
    }
    out->src = out->n > 1 ? n : NULL;
    return MS_OK;
}

/* Number of variants a mapping with these children has, after the zip/grid rule. */
static int combine_count(scn_ctx *x, const xset *ch, size_t n_ch, size_t *count,
                         const yx_node **src)
{
    size_t total = 1;
    *src = NULL;
    for (size_t i = 0; i < n_ch; i++) {
        if (ch[i].n == 1)
            continue;
        if (!x->zip) {
            if (total > SCN_MAX_RUNS / ch[i].n)
                return fail(x, ch[i].src, "split the sweep into several files",
                            "the sweep expands to more than %d runs", SCN_MAX_RUNS);
            total *= ch[i].n;
            if (!*src)
                *src = ch[i].src;
        } else if (!*src) {
            total = ch[i].n;
            *src = ch[i].src;
        } else if (ch[i].n != total) {
            char ref[64];
            snprintf(ref, sizeof ref, "%d:%d", (*src)->line, (*src)->col);
            return fail(x, ch[i].src,
                        "give every list the same number of values, or use 'sweep: grid'",
                        "this list gives %zu values but the list at %s gives %zu "
                        "('sweep: zip' walks all lists in step)",
                        ch[i].n, ref, total);
        }
    }
    *count = total;
    return MS_OK;
}

static int expand_map(scn_ctx *x, const yx_node *n, xset *out)
{
    xset *ch = calloc(n->n ? n->n : 1, sizeof *ch);
    if (!ch)
        return MS_ERR_NOMEM;
    int rc = MS_OK;
    size_t count = 1;
    for (size_t i = 0; i < n->n && !rc; i++)
        rc = expand(x, n->item[i], &ch[i]);
    if (!rc)
        rc = combine_count(x, ch, n->n, &count, &out->src);
    for (size_t v = 0; v < count && !rc; v++) {
        yx_node *m = made_map(x, n);
        if (!m) {
            rc = MS_ERR_NOMEM;
            break;
        }
        size_t rest = v; /* grid: mixed radix, the last key varies fastest */
        for (size_t i = n->n; i-- > 0 && !rc;) {
            size_t k = ch[i].n == 1 ? 0 : x->zip ? v : rest % ch[i].n;
            if (!x->zip && ch[i].n > 1)
                rest /= ch[i].n;
            rc = yx_push(m, n->key[i], (yx_node *)ch[i].v[k]);
        }
        if (!rc) { /* pushed in reverse: restore document order */
            for (size_t a = 0, b = m->n - 1; m->n && a < b; a++, b--) {
                yx_node *t = m->item[a];
                m->item[a] = m->item[b];
                m->item[b] = t;
                t = m->key[a];
                m->key[a] = m->key[b];
                m->key[b] = t;
            }
            rc = xset_push(out, m);
        }
    }
    for (size_t i = 0; i < n->n; i++)
        free(ch[i].v);
    free(ch);
    return rc;
}

int expand(scn_ctx *x, const yx_node *n, xset *out)
{
    if (n->kind == YX_SEQ)
        return expand_seq(x, n, out);
    if (n->kind == YX_MAP)
        return expand_map(x, n, out);
    out->src = NULL;
    return xset_push(out, n);
}
