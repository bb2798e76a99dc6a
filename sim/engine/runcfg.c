/* runcfg.c — a run configuration's owned memory (runcfg.h). */
#include "runcfg.h"

#include <stdlib.h>

void run_cfg_free(run_cfg *c)
{
    free(c->yaml);
    c->yaml = NULL;
}
