/* yschema.h — field-schema tables over yamlx trees: the one way every input file is read.
 *
 * A schema is a table of fields (key, type, offset into a struct, range, default, doc). Reading
 * a mapping against it rejects unknown keys with a did-you-mean, checks each value's type and
 * range, applies defaults and reports missing required keys, all as
 * "file:line:col: error: …\n  hint: …" (duplicate keys are already refused by yx_parse). The
 * same table prints the documentation (`mpcsim list keys`), so docs and reader cannot drift.
 *
 *   static const ys_field f[] = {
 *       {"threads", YS_INT, YS_AT(machine_profile, threads), 1, 4096, "1", "cores a party uses"},
 *   };
 *   static const ys_schema s = YS_SCHEMA("machine profile", f, "protocols/machines/README");
 *   ys_ctx x = {path, e};
 *   ys_defaults(&s, &m);
 *   rc = ys_read(&x, root, &s, NULL, 0, &m);
 *
 * The single-value readers (ys_u64, ys_double, …) are for callers whose keys are not a flat
 * struct (sweeps, unit variants, lists); they give the same messages. */
#ifndef MPCSIM_YSCHEMA_H
#define MPCSIM_YSCHEMA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "yamlx.h"

typedef enum {
    YS_U32,   /* uint32_t */
    YS_U64,   /* uint64_t */
    YS_INT,   /* int */
    YS_DBL,   /* double */
    YS_BOOL,  /* int 0/1; true/false (also yes/no, on/off, 1/0) */
    YS_STR,   /* char[size]; with names[], one of those words */
    YS_ENUM,  /* int: the index into names[] */
    YS_FIXED, /* the only accepted text is def (a format line); nothing stored */
    YS_INFO,  /* any scalar, kept for people; nothing stored */
    YS_OTHER, /* known key the caller reads itself (a mapping, a list, units …); type_doc says */
} ys_type;

#define YS_REQ 0x1   /* flags: the key must be present */
#define YS_WHOLE 0x2 /* YS_DBL: a whole number (read as a double, so 1e3 is 1000) */

typedef struct ys_field {
    const char *key;
    int type;                 /* ys_type */
    size_t off, size;         /* member of the target struct (YS_AT); size bounds YS_STR */
    double lo, hi;            /* numbers: inclusive range; lo = hi = 0 means unbounded */
    const char *def;          /* default as YAML text (applied by ys_defaults), or NULL */
    const char *doc;          /* one line for the key table */
    const char *const *names; /* YS_ENUM, YS_STR: NULL-terminated value names */
    int flags;                /* YS_REQ, YS_WHOLE */
    const char *hint;         /* extra hint for a bad value (e.g. how to regenerate a file) */
    const char *type_doc;     /* YS_OTHER: what the value is, e.g. "mapping" */
} ys_field;

#define YS_AT(T, member) offsetof(T, member), sizeof(((T *)0)->member)
#define YS_NONE 0, 0 /* for fields that store nothing */

typedef struct ys_schema {
    const char *name; /* "model", "machine profile": "unknown key 'x' in 'model'" */
    const ys_field *field;
    size_t n;
    const char *doc_ref; /* where the keys are explained, for hints */
} ys_schema;

#define YS_SCHEMA(name, table, ref)                    \
    {                                                  \
        name, table, sizeof table / sizeof *table, ref \
    }

/* Where messages point. code: the error class (0 = MS_ERR_INPUT; trace manifests use
 * MS_ERR_FORMAT). path NULL: messages carry no location (for text set outside a file). */
typedef struct ys_ctx {
    const char *path;
    errbuf *e;
    int code;
} ys_ctx;

/* "path:line:col: error: <fmt>[\n  hint: <hint>]"; returns the ctx's code. */
int ys_fail(const ys_ctx *x, const yx_node *at, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Another module's message (with or without "error: ") placed at a node, after what. */
int ys_fail_wrap(const ys_ctx *x, const yx_node *at, const char *hint, const char *what,
                 const char *msg);

/* ---- whole mappings ------------------------------------------------------------------- */

const ys_field *ys_find(const ys_schema *s, const char *key);
/* Every key of m is a field of s or one of extra[]; else "unknown key … (did you mean …?)". */
int ys_check_keys(const ys_ctx *x, const yx_node *m, const ys_schema *s, const char *const *extra,
                  size_t n_extra);
/* Sets every field that has a default (an internal error if a default does not parse). */
int ys_defaults(const ys_schema *s, void *obj);
/* One field's value node into obj. */
int ys_read_field(const ys_ctx *x, const yx_node *v, const ys_field *f, void *obj);
/* m must be a mapping: checks its keys (s plus extra[]), reads every storing field present,
 * and reports the first required field missing. Defaults are the caller's (ys_defaults). */
int ys_read(const ys_ctx *x, const yx_node *m, const ys_schema *s, const char *const *extra,
            size_t n_extra, void *obj);
/* One field from text (command-line overrides, key=value lists): messages have no location. */
int ys_set_text(const ys_field *f, const char *text, void *obj, errbuf *e);
/* 1 when the stored values of field f are equal in a and b. */
int ys_field_equal(const ys_field *f, const void *a, const void *b);

/* "integer 1..4096", "number", "gelu|swiglu", … */
void ys_type_text(const ys_field *f, char *buf, size_t cap);
/* The key table, one field a line: key, type and range, default, doc (80 columns). */
int ys_print(FILE *out, const ys_schema *s);

/* ---- single values (same messages) ---------------------------------------------------- */

int ys_need_scalar(const ys_ctx *x, const yx_node *v, const char *key, const char *type);
int ys_need_map(const ys_ctx *x, const yx_node *v, const char *key, const char *example);
int ys_u64(const ys_ctx *x, const yx_node *v, const char *key, uint64_t lo, uint64_t hi,
           uint64_t *out);
int ys_u32(const ys_ctx *x, const yx_node *v, const char *key, uint32_t lo, uint32_t hi,
           uint32_t *out);
int ys_i64(const ys_ctx *x, const yx_node *v, const char *key, long long lo, long long hi,
           long long *out);
int ys_double(const ys_ctx *x, const yx_node *v, const char *key, double lo, double hi,
              double *out);
int ys_bool(const ys_ctx *x, const yx_node *v, const char *key, int *out);
int ys_str(const ys_ctx *x, const yx_node *v, const char *key, char *out, size_t cap);
int ys_enum(const ys_ctx *x, const yx_node *v, const char *key, const char *const *names, size_t n,
            int *out);
/* 1 / 0 for YAML's true / false words (unquoted), -1 otherwise. */
int ys_bool_text(const char *s);

/* "unknown key 'k' in 'where' (did you mean 'x'?)" with the keys in the hint. */
int ys_unknown_key(const ys_ctx *x, const yx_node *key, const char *where, const char *const *keys,
                   size_t n);
/* "unknown <what> 'name' (did you mean 'x'?)". */
int ys_unknown_name(const ys_ctx *x, const yx_node *at, const char *what, const char *name,
                    const char *const *cands, size_t n, const char *hint);

#endif
