/* datadir.c — the data directory: $MPCSIM_DATA, the current folder, the build tree, an installed
 * copy, the compiled-in share folder. */
#include "datadir.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MPCSIM_DATADIR
#define MPCSIM_DATADIR "/usr/local/share/mpcsim"
#endif

/* A data folder holds models/ and protocols/. */
static int is_datadir(const char *dir)
{
    char p[PATH_MAX + 16];
    struct stat st;
    snprintf(p, sizeof p, "%s/models", dir);
    if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))
        return 0;
    snprintf(p, sizeof p, "%s/protocols", dir);
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Candidates next to the executable: [0] the build tree, [1] the installed share folder;
 * "" when /proc/self/exe cannot be read. Canonical paths when they exist. */
static char exe_cand[2][PATH_MAX + 32];
static const char *exe_found; /* the first exe-relative candidate that is a data folder */
static pthread_once_t exe_once = PTHREAD_ONCE_INIT;

static void find_exe_dirs(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return;
    *slash = '\0';
    static const char *const rel[2] = {"/../..", "/../share/mpcsim"};
    for (int i = 0; i < 2; i++) {
        char raw[PATH_MAX + 32], canon[PATH_MAX];
        snprintf(raw, sizeof raw, "%s%s", exe, rel[i]);
        snprintf(exe_cand[i], sizeof exe_cand[i], "%s", realpath(raw, canon) ? canon : raw);
        if (!exe_found && is_datadir(exe_cand[i]))
            exe_found = exe_cand[i];
    }
}

const char *mpcsim_datadir(void)
{
    const char *env = getenv("MPCSIM_DATA");
    if (env && *env)
        return env;
    if (is_datadir("."))
        return ".";
    pthread_once(&exe_once, find_exe_dirs);
    if (exe_found)
        return exe_found;
    return MPCSIM_DATADIR[0] ? MPCSIM_DATADIR : ".";
}

void mpcsim_datadir_searched(char *buf, size_t cap)
{
    const char *env = getenv("MPCSIM_DATA");
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        snprintf(cwd, sizeof cwd, ".");
    pthread_once(&exe_once, find_exe_dirs);
    if (env && *env) {
        snprintf(buf, cap,
                 "MPCSIM_DATA=%s (set MPCSIM_DATA to the mpcsim data folder, or unset "
                 "it to search the current folder, the build tree and %s)",
                 env, MPCSIM_DATADIR);
        return;
    }
    size_t o = (size_t)snprintf(buf, cap, "MPCSIM_DATA (not set), the current folder %s", cwd);
    static const char *const what[2] = {"the build tree", "the installed copy"};
    for (int i = 0; i < 2 && o < cap; i++)
        if (exe_cand[i][0])
            o += (size_t)snprintf(buf + o, cap - o, ", %s (%s)", exe_cand[i], what[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, ", %s; set MPCSIM_DATA to the mpcsim data folder",
                 MPCSIM_DATADIR);
}
