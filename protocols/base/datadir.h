/* datadir.h — where mpcsim finds its data (models/, protocols/machines/, scenarios/, scripts/),
 * from any working directory, in the build tree and installed. */
#ifndef MPCSIM_DATADIR_H
#define MPCSIM_DATADIR_H

#include <stddef.h>

/* The data directory, the first of:
 *   1. $MPCSIM_DATA, when set;
 *   2. the current directory, when it holds models/ and protocols/ (a source tree);
 *   3. the source tree the binary was built in: <executable's folder>/../.. (build/<variant>/);
 *   4. an installed copy: <executable's folder>/../share/mpcsim (make install PREFIX=…);
 *   5. the share directory compiled in (MPCSIM_DATADIR).
 * Never NULL. */
const char *mpcsim_datadir(void);

/* The places looked at, in order, for a "not found" message:
 * "MPCSIM_DATA (not set), the current folder /x, /src (build tree), …". */
void mpcsim_datadir_searched(char *buf, size_t cap);

#endif
