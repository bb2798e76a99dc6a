/* plugin.h — out-of-tree policies: shared objects built against the public header
 * include/mpcsim/policy_plugin.h, loaded at run time and served as policy_ops.
 *
 * A loaded plug-in is found by its name as a built-in is (policy_find), has a parameter
 * schema (policy_schema), and stays loaded for the life of the process (forked workers inherit
 * it). The ABI check, the entry point and what the host passes: policy_plugin.h. */
#ifndef MPCSIM_POLICY_PLUGIN_HOST_H
#define MPCSIM_POLICY_PLUGIN_HOST_H

#include <stddef.h>

#include "policy.h"

/* Most plug-ins one process loads. */
#define POLICY_PLUGIN_MAX 16

/* Loads the plug-in at path (once: the same file again gives the same ops). Errors name the
 * file: not loadable, no entry point, an ABI version mpcsim does not provide, a bad or taken
 * name, a missing required callback. */
int policy_plugin_load(const char *path, const policy_ops **out, errbuf *e);
/* A loaded plug-in by its policy name, or NULL. */
const policy_ops *policy_plugin_find(const char *name);
/* The loaded plug-ins in load order. */
const policy_ops *const *policy_plugin_all(size_t *n);
/* The plug-in's slot (0 ≤ slot < POLICY_PLUGIN_MAX), or -1 for a policy that is not one. */
int policy_plugin_slot(const policy_ops *p);
/* The file a loaded plug-in came from (as given to policy_plugin_load), or NULL. */
const char *policy_plugin_path(const policy_ops *p);
/* 1 when s names a plug-in file rather than a policy (it ends in ".so"). */
int policy_plugin_is_path(const char *s);

#endif
