/* yamlx.h — a small YAML node tree on top of libyaml, for configuration files.
 *
 * Every node keeps its 1-based line and column, so callers can report
 * "file:line:col: error: …". Parsing rejects what a configuration file should not contain:
 * duplicate keys in a mapping, non-scalar keys, and more than one document. Aliases are
 * resolved to deep copies of their anchored node (copies keep the anchor's marks).
 *
 *   yx_node *root;
 *   if (yx_parse(path, text, len, &root, e)) return MS_ERR_INPUT;
 *   const yx_node *v = yx_map_get(root, "name");
 *   …
 *   yx_free(root);
 */
#ifndef MPCSIM_YAMLX_H
#define MPCSIM_YAMLX_H

#include <stddef.h>
#include <stdio.h>

#include "err.h"

typedef enum { YX_SCALAR, YX_SEQ, YX_MAP } yx_kind;

typedef struct yx_node yx_node;
struct yx_node {
    int kind;       /* yx_kind */
    int line, col;  /* 1-based position of the node's first character */
    char *str;      /* YX_SCALAR: the value (never NULL) */
    int quoted;     /* YX_SCALAR: written in quotes or as a block scalar (never null/bool) */
    size_t n;       /* YX_SEQ: items; YX_MAP: pairs */
    yx_node **item; /* YX_SEQ: items; YX_MAP: values */
    yx_node **key;  /* YX_MAP: keys (scalars), in document order */
};

/* Parses one YAML document (text of len bytes; path is used in messages). An empty document
 * gives an empty mapping. Returns MS_OK or MS_ERR_INPUT with "path:line:col: error: …". */
int yx_parse(const char *path, const char *text, size_t len, yx_node **root, errbuf *e);
/* Reads a file and parses it; MS_ERR_IO if it cannot be read. */
int yx_parse_file(const char *path, yx_node **root, errbuf *e);
/* The same from an open stream, which it closes. A file is read up to 64 MiB; a larger one
 * (or an endless one like /dev/zero) is MS_ERR_INPUT. */
int yx_parse_fp(const char *path, FILE *f, yx_node **root, errbuf *e);
void yx_free(yx_node *n);

/* Mapping lookup: the value for key, or NULL (also when m is not a mapping). */
const yx_node *yx_map_get(const yx_node *m, const char *key);
/* 1 when a scalar is YAML null (~, null, Null, NULL or empty, unquoted). */
int yx_is_null(const yx_node *n);
/* "a scalar", "a list", "a mapping" — for type errors. */
const char *yx_kind_name(const yx_node *n);

/* Allocation helpers for callers that build trees (nodes they make are freed by yx_free). */
yx_node *yx_new(int kind, int line, int col);
yx_node *yx_new_scalar(const char *s, int quoted, int line, int col);
int yx_push(yx_node *parent, yx_node *key, yx_node *item); /* key NULL for sequences */
yx_node *yx_clone(const yx_node *n);

#endif
