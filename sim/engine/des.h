/* des.h — the discrete-event engine: a priority queue of events in integer nanoseconds.
 *
 * Events are keyed by (time, seq); seq is assigned when an event is scheduled, so events at
 * the same time run in the order they were scheduled (FIFO) and every run is reproducible bit
 * for bit. Time never goes backwards: scheduling an event before des_now() is a caller bug
 * (asserted). Each event carries one 64-bit payload the caller encodes (kind, party, index).
 *
 * Storage is one flat array holding a 4-ary min-heap: no allocation per event once the queue
 * has grown to its working size. Typical use is a pop loop:
 *
 *     des_event ev;
 *     while (des_pop(q, &ev))
 *         switch (ev.data & 3) { ... des_schedule(q, ev.time + d, payload); ... }
 */
#ifndef MPCSIM_DES_H
#define MPCSIM_DES_H

#include <stddef.h>
#include <stdint.h>

typedef struct des_event {
    uint64_t time; /* ns */
    uint64_t seq;  /* schedule order, unique per queue */
    uint64_t data; /* caller's payload */
} des_event;

typedef struct des des;

/* Creates a queue with room for cap_hint pending events (grows as needed). NULL on OOM. */
des *des_new(size_t cap_hint);
void des_free(des *q);
/* Empties the queue and rewinds time to 0 and seq to 0; keeps the capacity. */
void des_reset(des *q);

/* Schedules an event at absolute time t (t >= des_now(q)). 0 on success, -1 on OOM. */
int des_schedule(des *q, uint64_t t, uint64_t data);
/* Pops the earliest event into *ev and advances the clock to its time; 0 when empty. */
int des_pop(des *q, des_event *ev);

uint64_t des_now(const des *q);       /* time of the last popped event */
size_t des_pending(const des *q);     /* events scheduled and not yet popped */
uint64_t des_processed(const des *q); /* events popped since creation or reset */

/* Invariant checker, for asserts: heap order on (time, seq), no pending event before now. */
int des_is_sane(const des *q);

#endif
