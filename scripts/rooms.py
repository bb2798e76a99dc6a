#!/usr/bin/env python3
"""The include graph between the source rooms (folders) of mpcsim.

usage: scripts/rooms.py [-v] [REPO]   (REPO: default, the folder above this script)

Prints the rooms, the arrows between them (room A includes a header of room B), the arrows that
point up (to a room listed before A in ROOMS, the pipeline order from the command line down to
the base), the circles (rooms that reach each other), and the floors: a room's floor is the
longest chain of arrows below it. -v lists every arrow with its include count. Exit status 1
when an arrow points up or a circle exists.
"""
import os
import re
import sys

# The pipeline order, top to bottom (README.md, "Layout"): a room may include only rooms after it.
ROOMS = ["sim/cli", "sim/figure", "sim/scenario", "sim/serve", "sim/secure", "sim/replay", "sim/policy",
         "sim/trace", "sim/engine", "models", "protocols/backend", "protocols/program",
         "results", "protocols/base"]
INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')


def room_of(path):
    for r in sorted(ROOMS, key=len, reverse=True):
        if path.startswith(r + "/"):
            return r
    return None


def arrows(root):
    edges = {}
    for r in ROOMS:
        for dp, _, fs in os.walk(os.path.join(root, r)):
            for f in sorted(fs):
                p = os.path.relpath(os.path.join(dp, f), root)
                if not f.endswith((".c", ".h")) or room_of(p) != r:
                    continue
                with open(os.path.join(root, p), errors="replace") as fh:
                    for line in fh:
                        m = INCLUDE.match(line)
                        if not m or "/" not in m.group(1):
                            continue  # same-folder includes are bare
                        t = room_of(m.group(1))
                        if t and t != r:
                            edges.setdefault((r, t), []).append(f"{p} -> {m.group(1)}")
    return edges


def circles(succ):
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in ROOMS:
        if v not in index:
            visit(v)
    return out


def main():
    args = [a for a in sys.argv[1:] if a != "-v"]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    edges = arrows(root)
    succ = {r: {b for (a, b) in edges if a == r} for r in ROOMS}
    comps = circles(succ)
    comp_of = {v: k for k, c in enumerate(comps) for v in c}
    memo = {}

    def floor(k):
        if k not in memo:
            memo[k] = max((floor(comp_of[w]) + 1 for v in comps[k] for w in succ[v]
                           if comp_of[w] != k), default=0)
        return memo[k]

    order = {r: k for k, r in enumerate(ROOMS)}
    up = sorted((e for e in edges if order[e[1]] < order[e[0]]), key=lambda e: (order[e[0]], order[e[1]]))
    rings = [c for c in comps if len(c) > 1]
    floors = {}
    for r in ROOMS:
        floors.setdefault(floor(comp_of[r]), []).append(r)
    print(f"rooms {len(ROOMS)}, floors {len(floors)}, arrows {len(edges)}, arrows up {len(up)}, "
          f"circles {len(rings)}")
    for h in sorted(floors, reverse=True):
        print(f"  floor {h}: {' '.join(floors[h])}")
    for e in up:
        print(f"  up: {e[0]} -> {e[1]}: " + "; ".join(edges[e]))
    for c in rings:
        print("  circle: " + " ".join(sorted(c, key=order.get)))
    if "-v" in sys.argv:
        for e in sorted(edges, key=lambda e: (order[e[0]], order[e[1]])):
            print(f"  {e[0]} -> {e[1]}: {len(edges[e])}")
    return 1 if up or rings else 0


if __name__ == "__main__":
    sys.exit(main())
