/* dbq.h — what `report` and `plot` share about reading a results database: --where filters,
 * human units (also `cost`'s), the terminal's width. */
#ifndef MPCSIM_DBQ_H
#define MPCSIM_DBQ_H

#include <stddef.h>
#include <stdio.h>

#include "results/rdb.h"

#define DBQ_MAX_WHERE 16

/* --where KEY=VALUE[,VALUE…] as SQL over `runs r`: " AND (…)" per filter, or "" (malloc'd
 * into *out). KEY is a runs column (model, protocol, protocol_label, network, policy,
 * policy_label, prompt_len, decode_len, batch, latency_ms, bandwidth_mbps, machine, threads,
 * scenario, status, seed) or a path into the resolved config (workload.decode_stride,
 * policies[0].recent, …, through config_json). Numbers compare as numbers. 0, or 2 after printing
 * an error for cmd. */
int dbq_where(const char *cmd, const char *const *args, int n, char **out);

/* What `report` and `plot` start with: the --where filters as SQL (dbq_where, into *where) and
 * the database at path opened for reading what it holds (not created; migrated when older).
 * 0, or the exit status after the error printed for cmd (*where then freed and NULL). */
int dbq_open(const char *cmd, const char *path, const char *const *args, int n, char **where,
             rdb **db);

/* "950 ms", "12.3 s", "4.2 min", "3.1 h", "2.4 d". */
void dbq_seconds(char *out, size_t n, double s);
/* "512 B", "3.4 kB", "1.2 GB", "4.5 TB" (powers of 1000). */
void dbq_bytes(char *out, size_t n, double b);
/* Prints text wrapped at width (at least 24): at the last space that fits, or in one long word
 * (a label such as aby3(trunc=local,topk=quickselect)) after its last comma; continuation
 * lines indented by two spaces. */
void dbq_wrap(FILE *f, const char *s, int width);
/* The output width: given (> 0), else the terminal's when stdout is one ($COLUMNS, then the
 * tty), else 80. */
int dbq_columns(int given);

#endif
