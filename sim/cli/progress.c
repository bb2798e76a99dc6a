/* progress.c — the sweep's progress: a thread prints, the sweep reports runs starting and
 * ending under a mutex, a signal handler prints the last line. */
#include "progress.h"
#include "sim/replay/replay.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#define NAME_LEN 160

struct progress {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
    int thread_on, stop, tty, quiet;
    double period, t0, workers;
    size_t total, done, failed;
    double *w, wtotal, wdone;
    double *start;          /* [total] monotonic start time of a run in flight, 0 if not */
    char (*name)[NAME_LEN]; /* [total] */
    char hint[1024];
    const uint32_t *board; /* progress_board's, or NULL */
    int drawn;             /* a bar is on the terminal's last line */
    struct sigaction old_int, old_term;
};

static progress *volatile active; /* for the signal handler */

double progress_weight(const run_cfg *c)
{
    double L = c->model.n_layers ? c->model.n_layers : 1;
    double stride = c->work.decode_stride ? c->work.decode_stride : 1;
    double steps = 1 + ceil(c->work.decode_len / stride);
    double w = L * steps;
    if (strcmp(c->trace.source, "none") && c->trace.source[0]) {
        /* the replay reads the attention of every decode step over the whole cache */
        double ctx = (double)c->work.prompt_len + c->work.decode_len;
        w += L * (c->model.n_kv_heads ? c->model.n_kv_heads : 1) * ctx *
             (1.0 + c->work.decode_len) * 1e-4;
    }
    return w > 0 ? w : 1;
}

/* The fitted costs (progress.h): a layer of one simulated step (lowering, costing,
 * simulation), one element of the trace's keys, one multiply-add of the replay's attention. */
#define EST_LAYER_STEP_S 7e-5
#define EST_KEY_S 1.5e-9
#define EST_MAC_S 1.8e-11

double progress_cpu_estimate(const run_cfg *c, const replay_work *w)
{
    double L = c->model.n_layers, stride = c->work.decode_stride ? c->work.decode_stride : 1;
    double steps = ceil(c->work.decode_len / stride) +
                   (c->work.prefill_in_mpc && c->work.prompt_len > 0 ? 1 : 0);
    double s = EST_LAYER_STEP_S * L * steps + EST_MAC_S * w->att_macs;
    if (replay_reads_trace(c))
        s += EST_KEY_S * L * c->model.n_kv_heads * c->model.head_dim *
             ((double)c->work.prompt_len + c->work.decode_len);
    return s;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void progress_fmt_dur(char *out, size_t n, double s)
{
    long t = (long)(s + 0.5);
    if (t < 60)
        snprintf(out, n, "%lds", t);
    else if (t < 3600)
        snprintf(out, n, "%ld:%02ld", t / 60, t % 60);
    else if (t < 86400)
        snprintf(out, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(out, n, "%ldd %02ld:%02ld", t / 86400, t / 3600 % 24, t / 60 % 60);
}

static int term_width(void)
{
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
        return ws.ws_col;
    return 80;
}

/* The status without the bar: "12/36 runs (2 failed), elapsed 1:02, ETA 3:40". */
static size_t status_text(const progress *p, double t, char *out, size_t n)
{
    char el[32], eta[32];
    progress_fmt_dur(el, sizeof el, t - p->t0);
    if (p->wdone > 0 && t > p->t0) {
        double rate = p->wdone / (t - p->t0);
        progress_fmt_dur(eta, sizeof eta, fmax(0, p->wtotal - p->wdone) / rate);
    } else if (p->wtotal / p->workers > t - p->t0) {
        /* nothing finished yet: the cost model's CPU estimate over the workers, marked "~" */
        eta[0] = '~';
        progress_fmt_dur(eta + 1, sizeof eta - 1, p->wtotal / p->workers - (t - p->t0));
    } else {
        snprintf(eta, sizeof eta, "--"); /* past the estimate, nothing finished: no rate yet */
    }
    int k = snprintf(out, n, "%zu/%zu runs", p->done, p->total);
    if (p->failed)
        k += snprintf(out + k, n - (size_t)k, " (%zu failed)", p->failed);
    k += snprintf(out + k, n - (size_t)k, ", elapsed %s, ETA %s", el, eta);
    return (size_t)k;
}

void progress_status(progress *p, char *out, size_t n)
{
    pthread_mutex_lock(&p->mu);
    status_text(p, now_s(), out, n);
    pthread_mutex_unlock(&p->mu);
}

void progress_board(progress *p, const uint32_t *board)
{
    pthread_mutex_lock(&p->mu);
    p->board = board;
    pthread_mutex_unlock(&p->mu);
}

/* " 812/4096" — run i's positions replayed of all, when the board has them; else "". */
static void positions_text(const progress *p, size_t i, char *out, size_t n)
{
    out[0] = '\0';
    if (!p->board)
        return;
    uint32_t all = __atomic_load_n(&p->board[2 * i + 1], __ATOMIC_RELAXED);
    uint32_t done = __atomic_load_n(&p->board[2 * i], __ATOMIC_RELAXED);
    if (all)
        snprintf(out, n, " %u/%u", done < all ? done : all, all);
}

/* "#13 llama-2-7b lan full 45s 812/4096, #14 …" — the runs in flight, oldest first. */
static void inflight_text(const progress *p, double t, char *out, size_t n)
{
    size_t k = 0;
    out[0] = '\0';
    for (int pass = 0; pass < 1; pass++)
        for (size_t i = 0; i < p->total && k < n; i++) {
            if (p->start[i] <= 0)
                continue;
            char el[32], at[32];
            progress_fmt_dur(el, sizeof el, t - p->start[i]);
            positions_text(p, i, at, sizeof at);
            k += (size_t)snprintf(out + k, n - k, "%s%s %s%s", k ? ", " : "", p->name[i], el, at);
        }
}

static void draw(progress *p)
{
    if (p->quiet)
        return;
    double t = now_s();
    char st[256], fl[2048];
    status_text(p, t, st, sizeof st);
    inflight_text(p, t, fl, sizeof fl);
    if (p->tty) {
        int width = term_width(), bw = 20;
        int fill = p->total ? (int)((double)bw * (double)p->done / (double)p->total) : bw;
        char line[4096], bar[32];
        for (int i = 0; i < bw; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[bw] = '\0';
        int k = snprintf(line, sizeof line, "[%s] %s%s%s", bar, st, fl[0] ? " | " : "", fl);
        if (k > width - 1) /* one line, or the terminal scrolls on every redraw */
            k = width - 1;
        fprintf(stderr, "\r%.*s\033[K", k, line);
        p->drawn = 1;
    } else { /* a log: one short line, the runs in flight counted, the oldest named */
        size_t n = 0, old = 0;
        for (size_t i = 0; i < p->total; i++)
            if (p->start[i] > 0 && (!n++ || p->start[i] < p->start[old]))
                old = i;
        char el[32] = "";
        if (n)
            progress_fmt_dur(el, sizeof el, t - p->start[old]);
        char at[32] = "";
        if (n)
            positions_text(p, old, at, sizeof at);
        if (n)
            fprintf(stderr, "progress: %s; %zu in flight, the oldest %s for %s%s%s\n", st, n,
                    p->name[old], el, at[0] ? ", positions" : "", at);
        else
            fprintf(stderr, "progress: %s\n", st);
    }
    fflush(stderr);
}

static void *ticker(void *arg)
{
    progress *p = arg;
    pthread_mutex_lock(&p->mu);
    double next = now_s() + p->period;
    while (!p->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double wait = next - now_s();
        if (wait > 0) {
            double at = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec + wait;
            ts.tv_sec = (time_t)at;
            ts.tv_nsec = (long)((at - (double)ts.tv_sec) * 1e9);
            pthread_cond_timedwait(&p->cv, &p->mu, &ts);
            continue;
        }
        draw(p);
        next = now_s() + p->period;
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* The sweep forks its workers while the printer runs. A child inherits only the forking thread,
 * so a lock the printer held at that instant (one inside malloc, say: the sanitizer builds'
 * allocator is not made fork-safe) would stay locked in the child for ever. So no thread runs
 * across fork(): the printer is stopped before and started again after, in the parent. Only
 * the main thread forks and sets `active`. */
static progress *paused;

static void ticker_halt(progress *p)
{
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->th, NULL);
    p->thread_on = 0;
}

static void ticker_launch(progress *p)
{
    sigset_t all, old;
    sigfillset(&all); /* the printing thread must not take the signals meant for the sweep */
    pthread_sigmask(SIG_BLOCK, &all, &old);
    p->stop = 0;
    p->thread_on = pthread_create(&p->th, NULL, ticker, p) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void fork_prepare(void)
{
    paused = active && active->thread_on ? active : NULL;
    if (paused)
        ticker_halt(paused);
}

static void fork_parent(void)
{
    if (paused)
        ticker_launch(paused);
    paused = NULL;
}

/* ---- the interrupt line: async-signal-safe (write(2) and hand-made numbers only) ---------- */

static size_t put_s(char *b, size_t k, size_t n, const char *s)
{
    while (*s && k + 1 < n)
        b[k++] = *s++;
    return k;
}

static size_t put_u(char *b, size_t k, size_t n, size_t v)
{
    char d[24];
    int m = 0;
    do
        d[m++] = (char)('0' + v % 10);
    while ((v /= 10) && m < 23);
    while (m && k + 1 < n)
        b[k++] = d[--m];
    return k;
}

static void on_signal(int sig)
{
    progress *p = active;
    if (p) {
        char b[1536];
        size_t k = 0, n = sizeof b;
        k = put_s(b, k, n, p->drawn ? "\r\033[K" : "\n");
        k = put_s(b, k, n, "mpcsim run: interrupted by ");
        k = put_s(b, k, n, sig == SIGINT ? "SIGINT" : "SIGTERM");
        k = put_s(b, k, n, ": ");
        k = put_u(b, k, n, p->done);
        k = put_s(b, k, n, " of ");
        k = put_u(b, k, n, p->total);
        k = put_s(b, k, n, " runs are kept in the database (each in its own transaction); ");
        k = put_u(b, k, n, p->total - p->done);
        k = put_s(b, k, n, " remain: ");
        k = put_s(b, k, n, p->hint);
        k = put_s(b, k, n, "\n");
        ssize_t w = write(STDERR_FILENO, b, k);
        (void)w;
    }
    signal(sig, SIG_DFL); /* end as the signal would (exit status 128 + sig) */
    raise(sig);
}

progress *progress_start(size_t total, const double *weights, int workers, int tty, int quiet,
                         double period_s, const char *resume_hint)
{
    progress *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->w = calloc(total + 1, sizeof *p->w);
    p->start = calloc(total + 1, sizeof *p->start);
    p->name = calloc(total + 1, sizeof *p->name);
    if (!p->w || !p->start || !p->name) {
        free(p->w);
        free(p->start);
        free(p->name);
        free(p);
        return NULL;
    }
    p->total = total;
    p->workers = workers < 1 ? 1 : (size_t)workers > total && total ? (double)total : workers;
    for (size_t i = 0; i < total; i++) {
        p->w[i] = weights ? weights[i] : 1;
        p->wtotal += p->w[i];
    }
    p->tty = tty;
    p->quiet = quiet;
    p->period = tty ? 1 : period_s;
    p->t0 = now_s();
    snprintf(p->hint, sizeof p->hint, "%s", resume_hint ? resume_hint : "");
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    active = p;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &p->old_int);
    sigaction(SIGTERM, &sa, &p->old_term);
    if (!quiet) {
        pthread_mutex_lock(&p->mu);
        if (tty)
            draw(p);
        pthread_mutex_unlock(&p->mu);
        static int atfork_on;
        if (!atfork_on)
            atfork_on = pthread_atfork(fork_prepare, fork_parent, NULL) == 0;
        ticker_launch(p);
    }
    return p;
}

void progress_begin(progress *p, size_t i, const char *name)
{
    if (!p || i >= p->total)
        return;
    pthread_mutex_lock(&p->mu);
    p->start[i] = now_s();
    snprintf(p->name[i], NAME_LEN, "%s", name);
    if (p->tty)
        draw(p);
    pthread_mutex_unlock(&p->mu);
}

void progress_end(progress *p, size_t i, int failed)
{
    if (!p || i >= p->total)
        return;
    pthread_mutex_lock(&p->mu);
    p->start[i] = 0;
    p->done++;
    p->failed += failed != 0;
    p->wdone += p->w[i];
    if (p->tty)
        draw(p);
    pthread_mutex_unlock(&p->mu);
}

size_t progress_done(const progress *p) { return p ? p->done : 0; }
size_t progress_failed(const progress *p) { return p ? p->failed : 0; }

void progress_stop(progress *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (p->thread_on)
        pthread_join(p->th, NULL);
    sigaction(SIGINT, &p->old_int, NULL);
    sigaction(SIGTERM, &p->old_term, NULL);
    active = NULL;
    if (!p->quiet && p->tty) {
        draw(p);
        fputc('\n', stderr);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->w);
    free(p->start);
    free(p->name);
    free(p);
}
