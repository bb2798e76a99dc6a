/* rdb_config.c — what the results database derives from a run's stored configuration: the
 * resolved config as JSON, and the migrations that fill new columns of stored runs from their
 * config_yaml. */
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocols/base/yamlx.h"
#include "rdb.h"
#include "rdb_bind.h"
#include "rdb_int.h"

/* ---- the resolved config as JSON ----------------------------------------------------------- */

static json_t *scalar_json(const yx_node *n)
{
    const char *s = n->str;
    if (n->quoted)
        return json_string(s);
    if (yx_is_null(n))
        return json_null();
    if (!strcmp(s, "true") || !strcmp(s, "false"))
        return json_boolean(s[0] == 't');
    char *end;
    long long i;
    double d;
    if (!parse_i64(s, &i) && strspn(s, "+-0123456789") == strlen(s))
        return json_integer(i);
    d = strtod(s, &end);
    /* a number as YAML writes one (not "inf", "nan" or hex, which JSON has not) */
    if (*s && !*end && isfinite(d) && strspn(s, "+-0123456789.eE") == strlen(s))
        return json_real(d);
    return json_string(s);
}

static json_t *node_json(const yx_node *n)
{
    json_t *j;
    switch (n->kind) {
    case YX_SEQ:
        j = json_array();
        for (size_t i = 0; j && i < n->n; i++)
            if (json_array_append_new(j, node_json(n->item[i]))) {
                json_decref(j);
                return NULL;
            }
        return j;
    case YX_MAP:
        j = json_object();
        for (size_t i = 0; j && i < n->n; i++)
            if (json_object_set_new(j, n->key[i]->str, node_json(n->item[i]))) {
                json_decref(j);
                return NULL;
            }
        return j;
    default: return scalar_json(n);
    }
}

char *rdb_yaml_to_json(const char *yaml)
{
    yx_node *root = NULL;
    errbuf e;
    if (!yaml || yx_parse("config", yaml, strlen(yaml), &root, &e))
        return NULL;
    json_t *j = node_json(root);
    yx_free(root);
    char *out = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(j);
    return out;
}

/* ---- stored runs updated one by one from their config_yaml -------------------------------- */

typedef struct run_scratch {
    rdb_labels l;
    char *json; /* freed after the run's update */
} run_scratch;

/* The values of a stored run's update after its id, into v; how many, or 0 to leave the run
 * as it is. */
typedef size_t (*run_update)(const char *config_yaml, run_scratch *s, rdb_val *v);

/* For every stored run, upd_sql with the run's id as ?1 and fill's values after it. */
static int update_runs(rdb *db, const char *upd_sql, run_update fill, const char *what, errbuf *e)
{
    sqlite3_stmt *sel = NULL, *upd = NULL;
    int rc = MS_OK;
    if (rdb_prep(db->h, "SELECT id, config_yaml FROM runs", &sel) || rdb_prep(db->h, upd_sql, &upd))
        rc = DB_ERR(db, e, what);
    while (!rc && sqlite3_step(sel) == SQLITE_ROW) {
        run_scratch s;
        memset(&s, 0, sizeof s);
        rdb_val v[9] = {RV_INT(sqlite3_column_int64(sel, 0))};
        size_t n = fill((const char *)sqlite3_column_text(sel, 1), &s, v + 1);
        if (n && rdb_step_row(upd, v, n + 1))
            rc = DB_ERR(db, e, what);
        free(s.json);
    }
    sqlite3_finalize(sel);
    sqlite3_finalize(upd);
    return rc;
}

/* ---- migration 2 → 3: the new columns of stored runs --------------------------------------- */

static rdb_labeler labeler;

void rdb_set_labeler(rdb_labeler fn) { labeler = fn; }

static size_t json_vals(const char *yaml, run_scratch *s, rdb_val *v)
{
    s->json = rdb_yaml_to_json(yaml);
    v[0] = RV_TEXT(s->json);
    return 1;
}

static size_t label_vals(const char *yaml, run_scratch *s, rdb_val *v)
{
    const rdb_labels *l = &s->l;
    if (labeler(yaml, &s->l))
        return 0; /* a config this mpcsim cannot read again keeps the fallback */
    const rdb_val row[] = {RV_TEXT(l->model),          RV_TEXT(l->network),
                           RV_TEXT(l->policy_label),   RV_REAL(l->latency_ms),
                           RV_REAL(l->bandwidth_mbps), RV_TEXT(l->machine),
                           RV_INT(l->threads)};
    memcpy(v, row, sizeof row);
    return RV_N(row);
}

int rdb_migrate_labels(rdb *db, errbuf *e)
{
    int rc = update_runs(db, "UPDATE runs SET config_json = ?2 WHERE id = ?1", json_vals,
                         "migrating the runs' configurations", e);
    /* what the JSON tells without knowing run configs: the first link, the machine */
    if (!rc && sqlite3_exec(db->h,
                            "UPDATE runs SET policy_label = policy, "
                            "latency_ms = json_extract(config_json, '$.network.latency_ns') / 1e6, "
                            "bandwidth_mbps = json_extract(config_json, "
                            "'$.network.bandwidth_bps') / 1e6, "
                            "machine = json_extract(config_json, '$.machine.name'), "
                            "threads = json_extract(config_json, '$.machine.threads') "
                            "WHERE config_json IS NOT NULL AND json_valid(config_json);"
                            /* a custom network by its values, as run_label_network writes a
                             * uniform one */
                            "UPDATE runs SET network = printf('%gms/%g%s', latency_ms, "
                            "CASE WHEN bandwidth_mbps >= 1000 THEN bandwidth_mbps / 1000 "
                            "ELSE bandwidth_mbps END, CASE WHEN bandwidth_mbps >= 1000 THEN "
                            "' Gbit/s' ELSE ' Mbit/s' END) WHERE network = 'custom' AND latency_ms "
                            "IS NOT NULL AND bandwidth_mbps >= 1",
                            NULL, NULL, NULL) != SQLITE_OK)
        rc = DB_ERR(db, e, "migrating the runs' labels");
    if (!rc && labeler)
        rc = update_runs(db,
                         "UPDATE runs SET model = ?2, network = ?3, policy_label = ?4, "
                         "latency_ms = ?5, bandwidth_mbps = ?6, machine = ?7, threads = ?8 "
                         "WHERE id = ?1",
                         label_vals, "migrating the runs' labels", e);
    return rc;
}

/* ---- migration 3 → 4: the protocol labels of stored runs ------------------------------------ */

static size_t protocol_label_vals(const char *yaml, run_scratch *s, rdb_val *v)
{
    if (labeler(yaml, &s->l) || !s->l.protocol_label[0])
        return 0;
    v[0] = RV_TEXT(s->l.protocol_label);
    v[1] = RV_TEXT(s->l.model);
    v[2] = RV_TEXT(s->l.network);
    return 3;
}

int rdb_migrate_protocol_labels(rdb *db, errbuf *e)
{
    /* without a labeler (or for a config it cannot read again): the bare name */
    if (sqlite3_exec(db->h, "UPDATE runs SET protocol_label = protocol", NULL, NULL, NULL))
        return DB_ERR(db, e, "migrating the runs' protocol labels");
    if (!labeler)
        return MS_OK;
    return update_runs(db,
                       "UPDATE runs SET protocol_label = ?2, model = ?3, network = ?4 "
                       "WHERE id = ?1",
                       protocol_label_vals, "migrating the runs' protocol labels", e);
}

/* ---- migration 4 → 5: labels that spell out budgets and rates ------------------------------ */

static size_t all_label_vals(const char *yaml, run_scratch *s, rdb_val *v)
{
    size_t n = label_vals(yaml, s, v);
    if (!n)
        return 0;
    v[n] = RV_TEXT(s->l.protocol_label[0] ? s->l.protocol_label : NULL);
    return n + 1;
}

int rdb_migrate_relabel(rdb *db, errbuf *e)
{
    /* without a labeler: a network's rate as the labels write it ("20ms/300Mbps" → "20ms/300
     * Mbit/s") */
    if (sqlite3_exec(db->h,
                     "UPDATE runs SET network = replace(replace(network, 'Mbps', ' Mbit/s'), "
                     "'Gbps', ' Gbit/s') WHERE network GLOB '*[0-9]ms/[0-9]*[0-9][MG]bps*'",
                     NULL, NULL, NULL) != SQLITE_OK)
        return DB_ERR(db, e, "migrating the runs' labels");
    if (!labeler)
        return MS_OK;
    /* every label again from the stored config: a policy at its default budget named with it
     * ("h2o(heavy_ratio=0.1,recent_ratio=0.1)", once a bare "h2o"); protocol_label kept when the
     * labeler gives none */
    return update_runs(db,
                       "UPDATE runs SET model = ?2, network = ?3, policy_label = ?4, "
                       "latency_ms = ?5, bandwidth_mbps = ?6, machine = ?7, threads = ?8, "
                       "protocol_label = coalesce(?9, protocol_label) WHERE id = ?1",
                       all_label_vals, "labelling the stored runs again", e);
}

int rdb_migrate_policy_cost(rdb *db, errbuf *e)
{
    sqlite3_stmt *s = NULL;
    int has = 0;
    if (sqlite3_prepare_v2(db->h,
                           "SELECT count(*) FROM pragma_table_info('runs') WHERE name = "
                           "'policy_cost'",
                           -1, &s, NULL) != SQLITE_OK)
        return DB_ERR(db, e, "migrating the schema");
    if (sqlite3_step(s) == SQLITE_ROW)
        has = sqlite3_column_int(s, 0) > 0;
    sqlite3_finalize(s);
    if (!has &&
        sqlite3_exec(db->h, "ALTER TABLE runs ADD COLUMN policy_cost TEXT NOT NULL DEFAULT ''",
                     NULL, NULL, NULL) != SQLITE_OK)
        return DB_ERR(db, e, "migrating the schema");
    return MS_OK;
}
