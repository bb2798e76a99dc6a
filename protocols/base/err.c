/* err.c — error names, messages, exit codes; checked number parsing; did-you-mean. */
#include "err.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    int exit_code;
    const char *text;
} err_table[] = {
#define X(name, exit_code, text) {#name, exit_code, text},
    MPCSIM_ERRORS(X)
#undef X
};

const char *ms_err_name(int code)
{
    return (code >= 0 && code < MS_N_ERRORS) ? err_table[code].name : "ERR_UNKNOWN";
}

const char *ms_err_text(int code)
{
    return (code >= 0 && code < MS_N_ERRORS) ? err_table[code].text : "unknown error";
}

int ms_err_exit_code(int code)
{
    return (code >= 0 && code < MS_N_ERRORS) ? err_table[code].exit_code : 1;
}

int err_vset(errbuf *e, int code, const char *fmt, va_list ap)
{
    if (e) { /* format aside first: an argument may be e->msg itself */
        char tmp[sizeof e->msg];
        vsnprintf(tmp, sizeof tmp, fmt, ap);
        memcpy(e->msg, tmp, sizeof tmp);
    }
    return code;
}

int err_set(errbuf *e, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err_vset(e, code, fmt, ap);
    va_end(ap);
    return code;
}

/* ---- checked number parsing ------------------------------------------------------------ */

int parse_double(const char *s, double *out)
{
    char *end;
    if (!s || !*s)
        return -1;
    errno = 0;
    double v = strtod(s, &end);
    if (errno == ERANGE || end == s || *end != '\0' || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

int parse_i64(const char *s, long long *out)
{
    char *end;
    if (!s || !*s)
        return -1;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || end == s || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

int parse_u64(const char *s, unsigned long long *out)
{
    char *end;
    if (!s || !*s || *s == '-')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE || end == s || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

/* ---- did you mean ------------------------------------------------------------------------ */

size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64)
        return la > lb ? la : lb;
    size_t row[65];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t cost = (a[i - 1] == b[j - 1]) ? 0 : 1;
            size_t best = diag + cost;
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *did_you_mean(const char *word, const char *const *cands, size_t n)
{
    size_t limit = strlen(word) / 3;
    if (limit < 2)
        limit = 2;
    const char *best = NULL;
    size_t best_d = limit + 1;
    for (size_t i = 0; i < n; i++) {
        size_t d = edit_distance(word, cands[i]);
        if (d < best_d) {
            best_d = d;
            best = cands[i];
        }
    }
    return best;
}
