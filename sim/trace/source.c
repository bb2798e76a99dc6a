/* source.c — the trace a run config names (trace.h trace_open_run): a table of the sources by
 * their scenario name, each opening through its own module (a directory: tracedir.c; the
 * synthetic generator: synth.c; a recording of the model: tracerec.c's recorder into a private
 * directory). */
#include "trace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int open_npy(const run_cfg *cfg, uint32_t T, trace **out, errbuf *e)
{
    return trace_open(cfg->trace.path, out, e);
}

static int open_synth(const run_cfg *cfg, uint32_t T, trace **out, errbuf *e)
{
    trace_synth p;
    trace_synth_defaults(&p);
    int rc = trace_synth_from_kv(&p, cfg->trace.params, cfg->trace.n_params, cfg->scenario_path, e);
    return rc != MS_OK ? rc : trace_open_synth(&cfg->model, T, cfg->seed, &p, out, e);
}

static void remove_dir(const char *dir)
{
    char path[640];
    for (int a = 0; a < TRACE_N_ARRAYS; a++) {
        snprintf(path, sizeof path, "%s/%s.npy", dir, trace_array_name((trace_array)a));
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/manifest.yaml", dir);
    unlink(path);
    rmdir(dir);
}

/* Records into a private temporary directory, maps it, then unlinks the files. */
static int open_record(const run_cfg *cfg, uint32_t T, trace **out, errbuf *e)
{
    const char *tmp = getenv("TMPDIR");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/mpcsim-trace-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return err_set(e, MS_ERR_IO, "%s: error: cannot create (%s)", dir, strerror(errno));
    const char *model =
        cfg->model_ref[0] && strcmp(cfg->model_ref, "inline") ? cfg->model_ref : cfg->model.name;
    int rc = trace_record(model, cfg->trace.path, T, dir, e);
    if (rc == MS_OK)
        rc = trace_open(dir, out, e);
    remove_dir(dir);
    return rc;
}

static const struct {
    const char *name;
    int (*open)(const run_cfg *cfg, uint32_t T, trace **out, errbuf *e);
} sources[] = {{"npy", open_npy}, {"synth", open_synth}, {"record", open_record}};

int trace_open_run(const run_cfg *cfg, trace **out, errbuf *e)
{
    *out = NULL;
    const char *src = cfg->trace.source;
    uint32_t T = cfg->work.prompt_len + cfg->work.decode_len;
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++)
        if (!strcmp(src, sources[i].name))
            return sources[i].open(cfg, T, out, e);
    return err_set(e, MS_ERR_NOTFOUND, "run has no trace (trace source '%s')",
                   src[0] ? src : "none");
}
