/* mpcfix.h — what the backend's suites (check_mpc, check_tls, check_mpc_cli) share: the
 * protocol configuration their sessions run and the check of a key folder. */
#ifndef MPCSIM_TESTS_MPCFIX_H
#define MPCSIM_TESTS_MPCFIX_H

#include <stdint.h>

#include "protocols/program/proto.h"

/* The named protocol (semi2k, aby3) as the backend's sessions are tested: Z_2^64, 18 fractional
 * bits, puma approximations, the Beaver cache on; every other field zero. */
proto_cfg mpcfix_cfg(const char *name);

/* The key folder dir holds n nodes' keys: the folder 0700, each nodeI.key 0600 holding a private
 * key, each nodeI.pem 0644 holding a certificate. */
void mpcfix_assert_keys(const char *dir, int n);

/* Writes a frame header into h (MPC_FRAME_HDR bytes) field by field, as the wire format
 * (protocols/backend/mpc_net.h) lays it out: magic, version ver, type, op_id (a hello: the node),
 * seq (a hello: its security mode), payload length len; independent of the backend's own
 * encoding, so that a test can send any version or length. */
void mpcfix_frame(uint8_t *h, uint16_t ver, uint16_t type, uint32_t op_id, uint32_t seq,
                  uint64_t len);

/* The next SplitMix64 word of the stream *s (deterministic test data, not shares). */
uint64_t mpcfix_mix(uint64_t *s);

/* Deterministic test data (SplitMix64 from seed, not secret shares): values of |x| < 2^bound
 * (signed), or full 64-bit words (bound 64). */
void mpcfix_fill(uint64_t *v, size_t n, uint64_t seed, int bound);

#endif
