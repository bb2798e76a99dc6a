/* dbvar.c — the config keys that tell apart runs the labels show alike (dbvar.h). */
#include "dbvar.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct leaf {
    char *path, *val; /* "trace.seed", "2" */
} leaf;

typedef struct vrun {
    int64_t id;
    char *family, *ident; /* runs of one family share the variant's keys (a plot's series) */
    leaf *lf;
    size_t n, cap;
    char *variant;
} vrun;

typedef struct klist {
    char **key; /* config paths */
    size_t nk, capk;
} klist;

struct dbvar {
    vrun *r; /* by ident while building, then by id */
    size_t n;
    klist all; /* the config paths whose values tell runs apart */
    char *keytext;
};

static char *dup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

static int add_leaf(vrun *r, const char *path, const char *val)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 64;
        leaf *l = realloc(r->lf, cap * sizeof *l);
        if (!l)
            return -1;
        r->lf = l;
        r->cap = cap;
    }
    char *p = dup(path), *v = dup(val);
    if (!p || !v) {
        free(p);
        free(v);
        return -1;
    }
    r->lf[r->n++] = (leaf){p, v};
    return 0;
}

/* Every scalar of j under path, in document order ("model.layers", "policies[0].recent"). */
static int flatten(const json_t *j, char *path, size_t len, size_t cap, vrun *r)
{
    char v[64];
    if (json_is_object(j)) {
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)j, k, x)
        {
            size_t n = (size_t)snprintf(path + len, cap - len, "%s%s", len ? "." : "", k);
            if (len + n >= cap || flatten(x, path, len + n, cap, r))
                return -1;
        }
        path[len] = '\0';
        return 0;
    }
    if (json_is_array(j)) {
        size_t i;
        json_t *x;
        json_array_foreach(j, i, x)
        {
            size_t n = (size_t)snprintf(path + len, cap - len, "[%zu]", i);
            if (len + n >= cap || flatten(x, path, len + n, cap, r))
                return -1;
        }
        path[len] = '\0';
        return 0;
    }
    const char *val = v;
    if (json_is_string(j))
        val = json_string_value(j);
    else if (json_is_integer(j))
        snprintf(v, sizeof v, "%lld", (long long)json_integer_value(j));
    else if (json_is_real(j))
        snprintf(v, sizeof v, "%.15g", json_real_value(j));
    else
        snprintf(v, sizeof v, "%s", json_is_true(j) ? "true" : json_is_false(j) ? "false" : "null");
    return add_leaf(r, path, val);
}

static const char *value_at(const vrun *r, const char *path)
{
    for (size_t i = 0; i < r->n; i++)
        if (!strcmp(r->lf[i].path, path))
            return r->lf[i].val;
    return NULL;
}

static int has_key(const klist *v, const char *path)
{
    for (size_t i = 0; i < v->nk; i++)
        if (!strcmp(v->key[i], path))
            return 1;
    return 0;
}

static int add_key(klist *v, const char *path)
{
    if (has_key(v, path))
        return 0;
    if (v->nk == v->capk) {
        size_t cap = v->capk ? 2 * v->capk : 8;
        char **k = realloc(v->key, cap * sizeof *k);
        if (!k)
            return -1;
        v->key = k;
        v->capk = cap;
    }
    return (v->key[v->nk] = dup(path)) ? (v->nk++, 0) : -1;
}

static int by_ident(const void *a, const void *b)
{
    const vrun *x = a, *y = b;
    int c = strcmp(x->family, y->family);
    c = c ? c : strcmp(x->ident, y->ident);
    return c ? c : (x->id > y->id) - (x->id < y->id);
}

static int by_id(const void *a, const void *b)
{
    const vrun *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* The keys whose values differ within runs [r0, r1) that look alike: every key of the first
 * run compared across the group, and any key the first run lacks. */
static int group_keys(const dbvar *v, size_t r0, size_t r1, klist *out)
{
    const vrun *first = &v->r[r0];
    for (size_t i = 0; i < first->n; i++) {
        const char *p = first->lf[i].path, *a = first->lf[i].val;
        if (has_key(out, p))
            continue;
        for (size_t k = r0 + 1; k < r1; k++) {
            const char *b = value_at(&v->r[k], p);
            if (!b || strcmp(a, b)) {
                if (add_key(out, p))
                    return -1;
                break;
            }
        }
    }
    for (size_t k = r0 + 1; k < r1; k++)
        for (size_t i = 0; i < v->r[k].n; i++)
            if (!value_at(first, v->r[k].lf[i].path) && add_key(out, v->r[k].lf[i].path))
                return -1;
    return 0;
}

static void klist_free(klist *k)
{
    for (size_t i = 0; i < k->nk; i++)
        free(k->key[i]);
    free(k->key);
    memset(k, 0, sizeof *k);
}

/* A key as a variant names it: its last part ("mac_per_s"), or the whole path when another
 * key of the list ends the same. */
static const char *short_key(const klist *v, size_t i)
{
    const char *dot = strrchr(v->key[i], '.'), *tail = dot ? dot + 1 : v->key[i];
    for (size_t k = 0; k < v->nk; k++) {
        const char *d = strrchr(v->key[k], '.');
        if (k != i && !strcmp(d ? d + 1 : v->key[k], tail))
            return v->key[i];
    }
    return tail;
}

static char *join_variant(const klist *v, const vrun *r)
{
    size_t cap = 1;
    for (size_t i = 0; i < v->nk; i++) {
        const char *x = value_at(r, v->key[i]);
        cap += strlen(v->key[i]) + 2 + (x ? strlen(x) : 1);
    }
    char *s = malloc(cap), *o = s;
    if (!s)
        return NULL;
    *o = '\0';
    for (size_t i = 0; i < v->nk; i++) {
        const char *x = value_at(r, v->key[i]);
        o += sprintf(o, "%s%s=%s", i ? "," : "", short_key(v, i), x ? x : "-");
    }
    return s;
}

int dbvar_build(sqlite3 *h, const char *ident, const char *family, const char *where, int flags,
                dbvar **out)
{
    int ok_only = flags & DBVAR_OK_ONLY;
    *out = NULL;
    dbvar *v = calloc(1, sizeof *v);
    char *sql = sqlite3_mprintf("SELECT r.id, %s, r.config_json, %s FROM runs r WHERE %s %s", ident,
                                family ? family : ident, ok_only ? "r.status = 'ok'" : "1",
                                where ? where : "");
    sqlite3_stmt *s = NULL;
    int rc = v && sql && sqlite3_prepare_v2(h, sql, -1, &s, NULL) == SQLITE_OK ? 0 : -1;
    sqlite3_free(sql);
    size_t cap = 0;
    char path[512];
    while (!rc && sqlite3_step(s) == SQLITE_ROW) {
        if (v->n == cap) {
            cap = cap ? 2 * cap : 64;
            vrun *r = realloc(v->r, cap * sizeof *r);
            if (!r) {
                rc = -1;
                break;
            }
            v->r = r;
        }
        vrun *r = &v->r[v->n++];
        memset(r, 0, sizeof *r);
        r->id = sqlite3_column_int64(s, 0);
        const char *id_text = (const char *)sqlite3_column_text(s, 1),
                   *js = (const char *)sqlite3_column_text(s, 2),
                   *fam = (const char *)sqlite3_column_text(s, 3);
        r->ident = dup(id_text ? id_text : "");
        r->family = dup(fam ? fam : "");
        json_t *j = js ? json_loads(js, 0, NULL) : NULL;
        path[0] = '\0';
        if (!r->ident || !r->family || (j && flatten(j, path, 0, sizeof path, r)))
            rc = -1;
        json_decref(j);
    }
    sqlite3_finalize(s);
    if (!rc && v->n > 1)
        qsort(v->r, v->n, sizeof *v->r, by_ident);
    /* a family at a time: the keys that differ within any of its groups of look-alikes */
    for (size_t f0 = 0, f1; !rc && f0 < v->n; f0 = f1) {
        for (f1 = f0 + 1; f1 < v->n && !strcmp(v->r[f1].family, v->r[f0].family); f1++)
            ;
        klist fk = {0};
        for (size_t r0 = f0, r1; !rc && r0 < f1; r0 = r1) {
            for (r1 = r0 + 1; r1 < f1 && !strcmp(v->r[r1].ident, v->r[r0].ident); r1++)
                ;
            if (r1 - r0 > 1)
                rc = group_keys(v, r0, r1, &fk);
        }
        for (size_t i = 0; !rc && i < fk.nk; i++)
            rc = add_key(&v->all, fk.key[i]);
        for (size_t k = f0; fk.nk && !rc && k < f1; k++)
            if (!(v->r[k].variant = join_variant(&fk, &v->r[k])))
                rc = -1;
        klist_free(&fk);
    }
    size_t klen = 1;
    for (size_t i = 0; !rc && i < v->all.nk; i++)
        klen += strlen(v->all.key[i]) + 2;
    if (!rc && (v->keytext = malloc(klen)))
        for (size_t i = 0, o = 0; i < v->all.nk; i++)
            o += (size_t)sprintf(v->keytext + o, "%s%s", i ? ", " : "", v->all.key[i]);
    if (v && v->keytext && !v->all.nk)
        v->keytext[0] = '\0';
    rc = rc || !v->keytext ? -1 : 0;
    if (!rc && v->n) /* no runs matched: v->r may be NULL, which qsort must not be given */
        qsort(v->r, v->n, sizeof *v->r, by_id);
    if (rc) {
        dbvar_free(v);
        return -1;
    }
    *out = v;
    return 0;
}

const char *dbvar_of(const dbvar *v, int64_t id)
{
    vrun key = {.id = id};
    const vrun *r = v && v->n ? bsearch(&key, v->r, v->n, sizeof *v->r, by_id) : NULL;
    return r && r->variant ? r->variant : "";
}

const char *dbvar_keys(const dbvar *v) { return v && v->keytext ? v->keytext : ""; }

static void run_variant_fn(sqlite3_context *cx, int argc, sqlite3_value **argv)
{
    (void)argc;
    const dbvar *v = sqlite3_user_data(cx);
    sqlite3_result_text(cx, dbvar_of(v, sqlite3_value_int64(argv[0])), -1, SQLITE_TRANSIENT);
}

int dbvar_sql(sqlite3 *h, dbvar *v)
{
    return sqlite3_create_function(h, "run_variant", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, v,
                                   run_variant_fn, NULL, NULL) == SQLITE_OK
               ? 0
               : -1;
}

void dbvar_free(dbvar *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n; i++) {
        for (size_t k = 0; k < v->r[i].n; k++) {
            free(v->r[i].lf[k].path);
            free(v->r[i].lf[k].val);
        }
        free(v->r[i].lf);
        free(v->r[i].ident);
        free(v->r[i].family);
        free(v->r[i].variant);
    }
    free(v->r);
    klist_free(&v->all);
    free(v->keytext);
    free(v);
}
