/* mpc_eng.c — the engine registry (mpc_eng.h): the protocol's backend found by name in a table
 * of the engines (mpc_semi2k.c, mpc_aby3.c), which build on the shared core (mpc_local.c) and
 * know nothing of each other or of this table's callers. */
#include "mpc_eng.h"

#include <stdlib.h>
#include <string.h>

#include "mpc_local.h"
#include "protocols/program/kern.h"

static const mpc_backend *const backends[] = {&mpc_backend_semi2k, &mpc_backend_aby3};

static mpc_core *core(eng *e) { return (mpc_core *)e->impl; }

int mpc_engine_new(const proto_cfg *cfg, mpc_net *net, eng **out, errbuf *err)
{
    const mpc_backend *be = NULL;
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (!strcmp(cfg->name, backends[i]->name))
            be = backends[i];
    if (!be)
        return err_set(err, MS_ERR_INPUT, "mpc: no backend for protocol '%s' (semi2k, aby3)",
                       cfg->name);
    int nodes = mpc_net_nodes(net);
    if (nodes != 3)
        return err_set(err, MS_ERR_USAGE, "mpc %s: needs 3 nodes (%s), the mesh has %d", cfg->name,
                       be->nodes, nodes);
    if (cfg->ring_bits != 64)
        return err_set(err, MS_ERR_INPUT, "mpc %s: the backend computes over Z_2^64, not %d bits",
                       cfg->name, cfg->ring_bits);
    eng *e = calloc(1, sizeof *e);
    if (!e)
        return err_set(err, MS_ERR_NOMEM, "mpc: out of memory");
    e->cfg = *cfg;
    if (kern_configure(cfg, &e->kv)) {
        free(e);
        return err_set(err, MS_ERR_INPUT, "mpc %s: unknown kernel variant", cfg->name);
    }
    e->pr = proto_find(cfg->name);
    int rc = be->attach(e, net, err);
    if (e->impl)
        core(e)->be = be;
    if (rc) {
        mpc_engine_free(e);
        return rc;
    }
    *out = e;
    return MS_OK;
}

void mpc_engine_free(eng *e)
{
    if (!e)
        return;
    if (e->impl)
        core(e)->be->detach(e);
    free(e);
}

const char *mpc_engine_error(const eng *e) { return ((const mpc_core *)e->impl)->err.msg; }

int mpc_engine_is_dealer(const eng *e) { return ((const mpc_core *)e->impl)->party < 0; }

void mpc_engine_pub_counts(const eng *e, uint64_t *n, uint64_t *sum)
{
    const mpc_core *c = e->impl;
    *n = c->pub_n;
    *sum = c->pub_sum;
}

int mpc_engine_setup_fixed(eng *e, uint32_t y_id, const mpc_val *y, const char *name)
{
    return core(e)->be->setup_fixed ? core(e)->be->setup_fixed(e, y_id, y, name) : MS_OK;
}

void mpc_engine_unbind_fixed(eng *e)
{
    if (core(e)->be->unbind_fixed)
        core(e)->be->unbind_fixed(e);
}

int mpc_engine_share_public(eng *e, mpc_val *z, const uint64_t *plain, size_t n, int dom)
{
    mpc_core *c = core(e);
    int rc = mpc_l_alloc(e, z, n, dom);
    if (!rc && c->pub_slot >= 0 && c->ns)
        memcpy(z->s[c->pub_slot], plain, n * sizeof *plain);
    return rc;
}
