#!/usr/bin/env python3
"""net_trace.py [--skip R] [FILE] — sums the real backend's round trace (MPCSIM_NET_TRACE=1:
one "mpc net trace:" line per node and round on stderr, protocols/backend/mpc_net.c) per node:
from the end of its R-th traced round (default 0: its first) to the end of its last, the wall
time, the node's CPU time, its time runnable but not running (waiting for a core) and the rest,
blocked (waiting for a peer's bytes with nothing to run); then the CPU time between rounds
(computing) and in rounds (moving bytes: TLS, copies, system calls). Reads stdin without FILE.

    MPCSIM_NET_TRACE=1 build/release/bench_mpc --op lt --protocol aby3 --n 65536 \\
        --reps 5 --warmup 1 2> trace.txt
    scripts/net_trace.py --skip 10 trace.txt
"""
import re
import sys

LINE = re.compile(r"mpc net trace: node (\d+) op \d+ round \d+(?: setup)? t (\d+) (\d+) "
                  r"cpu (\d+) (\d+) runq (\d+) (\d+) sent (\d+) recv (\d+)")


def main(argv):
    skip, path = 0, None
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--skip" and args and args[0].isdigit():
            skip = int(args.pop(0))
        elif path is None and not a.startswith("-"):
            path = a
        else:
            sys.stderr.write(__doc__.splitlines()[0] + "\n")
            return 2
    nodes = {}
    with (open(path) if path else sys.stdin) as f:
        for line in f:
            m = LINE.search(line)
            if m:
                v = [int(x) for x in m.groups()]
                nodes.setdefault(v[0], []).append(v[1:])
    if not nodes:
        sys.stderr.write("net_trace: no 'mpc net trace:' lines (run with MPCSIM_NET_TRACE=1)\n")
        return 1
    ms = 1e-6
    print("node  rounds    wall ms     cpu ms   runnable ms  blocked ms   cpu between   cpu in")
    for node in sorted(nodes):
        r = nodes[node][skip:]
        if len(r) < 2:
            print(f"{node:4d}  fewer than 2 rounds after --skip {skip}")
            continue
        first, last = r[0], r[-1]
        wall = last[1] - first[1]
        cpu = last[3] - first[3]
        runq = last[5] - first[5]
        inside = sum(x[3] - x[2] for x in r[1:])
        print(f"{node:4d} {len(r) - 1:7d} {wall * ms:10.1f} {cpu * ms:10.1f} {runq * ms:12.1f} "
              f"{(wall - cpu - runq) * ms:11.1f} {(cpu - inside) * ms:13.1f} {inside * ms:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
