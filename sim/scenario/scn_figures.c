/* scn_figures.c — a scenario's `figures:` list: the figures `mpcsim run` draws after the sweep,
 * in `mpcsim plot`'s vocabulary (--figure, --y, --x, --row, --col, --metric, --name), checked
 * when the scenario loads. Part of the scenario reader (scn.c; shared declarations in
 * scn_int.h). */
#include "scn_int.h"

#include <stdio.h>
#include <string.h>

#include "sim/policy/policy.h"
#include "protocols/base/metric_def.h"
#include "protocols/base/yamlx.h"
#include "protocols/base/yschema.h"

static const char *const figure_names[] = {"budget", "cost", "pareto", "study", "breakdown", NULL};
/* the facets of the faceted figures (`mpcsim plot --row/--col`) and the panels of the breakdown
 * (`--by`) */
static const char *const facet_keys[] = {"model",      "protocol",   "network", "policy",
                                         "prompt_len", "decode_len", "machine", "none"};
static const char *const panel_keys[] = {"model",  "network", "protocol",
                                         "policy", "machine", "none"};
/* the runs columns an axis may be */
static const char *const run_axes[] = {"prompt_len", "decode_len", "batch", "latency_ms",
                                       "bandwidth_mbps"};
#define N_OF(a) (sizeof a / sizeof a[0])

#define FIG(member) YS_AT(scn_figure, member)
static const ys_field figure_fields[] = {
    {"figure", YS_STR, FIG(figure), 0, 0, NULL,
     "budget, cost, pareto, study (those three) or breakdown; or y instead", figure_names, 0, NULL,
     NULL},
    {"y", YS_OTHER, YS_NONE, 0, 0, NULL, "metrics against x (a name, or a list: a column each)",
     NULL, 0, NULL, "name|list"},
    {"x", YS_STR, FIG(x), 0, 0, NULL,
     "a metric, kept_frac, a numeric policy parameter, or prompt_len, decode_len, batch, "
     "latency_ms, bandwidth_mbps",
     NULL, 0, NULL, NULL},
    {"row", YS_STR, FIG(row), 0, 0, NULL,
     "a row of panels per value of these keys (comma-separated; breakdown: its panels)", NULL, 0,
     NULL, NULL},
    {"col", YS_STR, FIG(col), 0, 0, NULL, "a column of panels per value of these keys", NULL, 0,
     NULL, NULL},
    {"metric", YS_STR, FIG(metric), 0, 0, NULL, "budget and pareto: the accuracy metric", NULL, 0,
     NULL, NULL},
    {"name", YS_STR, FIG(name), 0, 0, NULL,
     "the file, NAME.png, .svg or .pdf, in the plots folder (default: the figure's own name)", NULL,
     0, NULL, NULL},
};
#undef FIG
static const ys_schema figure_schema = YS_SCHEMA("figures", figure_fields, "scenarios/README.md");

const ys_schema *scn_figure_schema(void) { return &figure_schema; }

/* A metric of the registry (a per-party one by any party's name). */
static int is_metric(const char *name)
{
    if (metric_def_find(name))
        return 1;
    const char *p = strrchr(name, '_');
    if (!p || p[1] != 'p' || !p[2] || strspn(p + 2, "0123456789") != strlen(p + 2))
        return 0;
    char base[64];
    snprintf(base, sizeof base, "%.*s", (int)(p - name), name);
    const metric_def *d = metric_def_find(base);
    return d && d->per_party;
}

/* A parameter of some policy (policy.NAME or NAME). */
static int is_policy_param(const char *name)
{
    const char *param = !strncmp(name, "policy.", 7) ? name + 7 : name;
    size_t n;
    const policy_ops *const *all = policy_all(&n);
    for (size_t i = 0; i < n; i++) {
        const ys_schema *s = policy_schema(all[i]);
        if (s && strcmp(param, "name") && ys_find(s, param))
            return 1;
    }
    return 0;
}

static int in(const char *s, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(s, names[i]))
            return 1;
    return 0;
}

/* Every comma-separated key of keys (the value at v) is one of names. */
static int check_facets(scn_ctx *x, const yx_node *v, const char *key, const char *keys,
                        const char *const *names, size_t n)
{
    char buf[128], hint[512];
    snprintf(buf, sizeof buf, "%s", keys);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (!in(t, names, n)) {
            hint_names(hint, sizeof hint, "comma-separated, of:", names, n);
            char what[64];
            snprintf(what, sizeof what, "'%s' key", key);
            return unknown_name(x, v, what, t, names, n, hint);
        }
    return MS_OK;
}

/* y: a metric name, a comma-separated list, or a YAML list; into f->y as "a,b". */
static int read_y(scn_ctx *x, const yx_node *v, scn_figure *f)
{
    const yx_node *one = v;
    size_t n = v->kind == YX_SEQ ? v->n : 1, l = 0;
    if (n == 0 || n > 8)
        return fail(x, v, "give one metric, or a list of up to 8 (a column each)",
                    "'y' takes 1 to 8 metrics, not %zu", n);
    for (size_t i = 0; i < n; i++) {
        if (v->kind == YX_SEQ)
            one = v->item[i];
        int rc = need_scalar(x, one, "y", "a metric name");
        if (rc)
            return rc;
        char buf[256];
        snprintf(buf, sizeof buf, "%s", one->str);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (!is_metric(t)) {
                size_t nm;
                const metric_def *defs = metric_defs(&nm);
                const char *names[128];
                size_t k = 0;
                for (size_t j = 0; j < nm && k < N_OF(names); j++)
                    names[k++] = defs[j].name;
                return unknown_name(x, one, "metric", t, names, k,
                                    "results/SCHEMA.md lists the metrics");
            }
            l += (size_t)snprintf(f->y + l, l < sizeof f->y ? sizeof f->y - l : 0, "%s%s",
                                  l ? "," : "", t);
        }
    }
    if (l >= sizeof f->y)
        return fail(x, v, NULL, "'y' is longer than %zu characters", sizeof f->y - 1);
    return MS_OK;
}

/* name: NAME.png|svg|pdf, a plain file name; unique among the figures. */
static int check_name(scn_ctx *x, const yx_node *v, const scenario *s, const scn_figure *f)
{
    const char *dot = strrchr(f->name, '.');
    if (!dot || dot == f->name ||
        (strcmp(dot, ".png") && strcmp(dot, ".svg") && strcmp(dot, ".pdf")))
        return fail(x, v, "e.g. name: accuracy-budget.png (.png, .svg or .pdf)",
                    "a figure's name is a file name ending in .png, .svg or .pdf, not '%s'",
                    f->name);
    if (f->name[0] == '.' || strspn(f->name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                             "0123456789._-") != strlen(f->name))
        return fail(x, v, "letters, digits, '.', '_' and '-'; the folder is the plots folder",
                    "a figure's name is a plain file name, not '%s'", f->name);
    for (size_t i = 0; i < s->n_figures; i++)
        if (!strcmp(s->figures[i].name, f->name))
            return fail(x, v, "give each figure its own name", "figure '%s' named twice", f->name);
    return MS_OK;
}

static int read_figure(scn_ctx *x, const yx_node *m, scenario *s, scn_figure *f)
{
    int rc =
        need_map(x, m, "figures", "- {figure: budget} or - {y: attn_mass_recall, x: kept_frac}");
    if (rc || (rc = ys_read(&x->y, m, &figure_schema, NULL, 0, f)))
        return rc;
    const yx_node *y = yx_map_get(m, "y");
    if (y && (rc = read_y(x, y, f)))
        return rc;
    if (!f->figure[0] && !f->y[0])
        return fail(x, m, "e.g. {figure: budget}, or {y: attn_mass_recall, x: kept_frac}",
                    "a figure needs 'figure' or 'y'");
    if (f->figure[0] && f->y[0])
        return fail(x, y, "'figure' draws a figure of its own; 'y' draws yours: keep one",
                    "'figure' and 'y' exclude each other");
    int bd = !strcmp(f->figure, "breakdown");
    const yx_node *v;
    if (f->x[0] && (v = yx_map_get(m, "x"))) {
        if (bd && !in(f->x, run_axes, N_OF(run_axes)))
            return unknown_name(x, v, "breakdown axis", f->x, run_axes, N_OF(run_axes),
                                "the breakdown is taken at the largest value of a runs column");
        if (!in(f->x, run_axes, N_OF(run_axes)) && !is_metric(f->x) && !is_policy_param(f->x))
            return fail(x, v,
                        "a metric (results/SCHEMA.md; kept_frac is the budget), a numeric "
                        "policy parameter, or prompt_len, decode_len, batch, latency_ms, "
                        "bandwidth_mbps",
                        "'%s' is no axis", f->x);
    }
    if (f->row[0] &&
        (rc = check_facets(x, yx_map_get(m, "row"), "row", f->row, bd ? panel_keys : facet_keys,
                           bd ? N_OF(panel_keys) : N_OF(facet_keys))))
        return rc;
    if (f->col[0] && bd)
        return fail(x, yx_map_get(m, "col"), "its panels are rows ('row'); a column per measure",
                    "the breakdown takes no 'col'");
    if (f->col[0] &&
        (rc = check_facets(x, yx_map_get(m, "col"), "col", f->col, facet_keys, N_OF(facet_keys))))
        return rc;
    /* several metrics are the columns (cost: latency and bytes), as `mpcsim plot` draws them */
    if (f->col[0] &&
        (!strcmp(f->figure, "cost") || !strcmp(f->figure, "study") || strchr(f->y, ',')))
        return fail(x, yx_map_get(m, "col"), "facet by 'row' (comma-separated keys)",
                    "%s draws a column per metric: no 'col'",
                    f->y[0]               ? "a figure of several metrics"
                    : f->figure[0] == 'c' ? "'cost'"
                                          : "'study' (its cost figure)");
    if (f->metric[0] && (v = yx_map_get(m, "metric"))) {
        const metric_def *d = metric_def_find(f->metric);
        if (!d || d->kind != MK_ACCURACY)
            return fail(x, v, "an accuracy metric, e.g. attn_mass_recall (results/SCHEMA.md)",
                        "'%s' is no accuracy metric", f->metric);
    }
    if (f->name[0]) {
        v = yx_map_get(m, "name");
        if (!strcmp(f->figure, "study"))
            return fail(x, v, "study draws three files; name each figure on its own",
                        "'study' takes no 'name'");
        if ((rc = check_name(x, v, s, f)))
            return rc;
    }
    return MS_OK;
}

/* The files figure f writes into the plots folder, as `mpcsim plot` names them (plot_rel.c,
 * plot_std.c): its name, else the figure's own (study: three). A y figure without x takes its x
 * from the data (kept_frac or prompt_len): "Y-vs-" then, which only another such figure of the
 * same first metric writes too. The count. */
#define FIG_FILE 128
static size_t figure_files(const scn_figure *f, char out[3][FIG_FILE])
{
    static const char *const study[] = {"accuracy-budget.png", "cost-budget.png",
                                        "pareto-step.png"};
    if (f->name[0]) {
        snprintf(out[0], FIG_FILE, "%s", f->name);
        return 1;
    }
    if (!strcmp(f->figure, "study")) {
        for (size_t i = 0; i < 3; i++)
            snprintf(out[i], FIG_FILE, "%s", study[i]);
        return 3;
    }
    const char *own = !strcmp(f->figure, "budget")      ? study[0]
                      : !strcmp(f->figure, "cost")      ? study[1]
                      : !strcmp(f->figure, "pareto")    ? study[2]
                      : !strcmp(f->figure, "breakdown") ? "breakdown.png"
                                                        : NULL;
    if (own)
        snprintf(out[0], FIG_FILE, "%s", own);
    else /* the first metric of y, as plot_rel.c names the file */
        snprintf(out[0], FIG_FILE, "%.*s-vs-%.40s%s",
                 (int)(strcspn(f->y, ",") < 40 ? strcspn(f->y, ",") : 40), f->y, f->x,
                 f->x[0] ? ".png" : "");
    return 1;
}

/* The second of two figures that would write one file is refused, at its 'name' or its entry. */
static int check_files(scn_ctx *x, const yx_node *m, const scenario *s, const scn_figure *f)
{
    char mine[3][FIG_FILE], theirs[3][FIG_FILE];
    size_t n = figure_files(f, mine);
    for (size_t i = 0; i < s->n_figures; i++) {
        size_t k = figure_files(&s->figures[i], theirs);
        for (size_t a = 0; a < n; a++)
            for (size_t b = 0; b < k; b++)
                if (!strcmp(mine[a], theirs[b])) {
                    const yx_node *at = yx_map_get(m, "name");
                    if (f->x[0] || !f->y[0])
                        return fail(x, at ? at : m, "give one of them another file: name: NAME.png",
                                    "this figure writes %s, as figure %zu does", mine[a], i + 1);
                    return fail(x, at ? at : m,
                                "give one of them another file (name: NAME.png) or an x",
                                "this figure draws %.*s against the data's default x, as "
                                "figure %zu does: one file for both",
                                (int)strcspn(f->y, ","), f->y, i + 1);
                }
    }
    return MS_OK;
}

int read_figures(scn_ctx *x, const yx_node *v, scenario *s)
{
    s->n_figures = 0;
    if (!v)
        return MS_OK;
    if (v->kind != YX_SEQ)
        return fail(x, v, "write figures: [{figure: budget}, {figure: cost}]",
                    "'figures' must be a list of mappings, not %s", yx_kind_name(v));
    if (v->n > SCN_MAX_FIGURES)
        return fail(x, v, "split them over several scenarios, or draw more with 'mpcsim plot'",
                    "at most %d figures, not %zu", SCN_MAX_FIGURES, v->n);
    for (size_t i = 0; i < v->n; i++) {
        scn_figure f;
        memset(&f, 0, sizeof f);
        int rc = read_figure(x, v->item[i], s, &f);
        if (!rc)
            rc = check_files(x, v->item[i], s, &f);
        if (rc)
            return rc;
        s->figures[s->n_figures++] = f;
    }
    return MS_OK;
}
