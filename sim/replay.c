/* replay.c — the policy replay for the full cache without a trace: every layer and KV head
 * attends to all kv_len cached entries, the policy costs nothing and measures nothing. */
#include "replay.h"

#include <stdlib.h>
#include <string.h>

struct replay {
    size_t n_kept; /* layers · KV heads */
};

int replay_open(const run_cfg *cfg, replay **out, errbuf *e)
{
    if (cfg->policy.name[0] && strcmp(cfg->policy.name, "full") != 0)
        return err_set(e, MS_ERR_NOTFOUND,
                       "policy '%s': this build replays only the full cache", cfg->policy.name);
    if (cfg->trace.source[0] && strcmp(cfg->trace.source, "none") != 0)
        return err_set(e, MS_ERR_NOTFOUND,
                       "trace source '%s': this build replays only the full cache without a "
                       "trace", cfg->trace.source);
    replay *r = calloc(1, sizeof *r);
    if (!r)
        return err_set(e, MS_ERR_NOMEM, "replay: out of memory");
    r->n_kept = (size_t)cfg->model.n_layers * cfg->model.n_kv_heads;
    *out = r;
    return MS_OK;
}

int replay_prefill(replay *r, op_program *prog, errbuf *e)
{
    (void)r, (void)prog, (void)e;
    return MS_OK;
}

int replay_step(replay *r, uint32_t step, uint32_t kv_len, uint32_t *kept, op_program *prog,
                errbuf *e)
{
    (void)step, (void)prog, (void)e;
    for (size_t i = 0; i < r->n_kept; i++)
        kept[i] = kv_len;
    return MS_OK;
}

int replay_metrics(replay *r, run_result *res, errbuf *e)
{
    (void)r, (void)res, (void)e;
    return MS_OK;
}

void replay_close(replay *r) { free(r); }
