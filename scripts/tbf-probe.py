#!/usr/bin/python3
"""tbf-probe.py — what one tbf-shaped veth link carries for TCP traffic (BENCHMARKS.md, "What the
shaped prefills missed"). Needs root and iproute2.

Two network namespaces joined by a veth pair (MTU 1500) with tbf on each end, as
`mpcsim validate --shape` builds them (rate RATE, burst 1 ms of traffic and at least 3100
bytes, latency 1000ms). Over one TCP connection with the backend's socket options
(protocols/backend/mpc_net.c: TCP_NODELAY, 4 MiB send and receive buffers):

  one-way   ROUNDS transfers of SIZE bytes a→b, each answered by 1 byte;
  two-way   ROUNDS rounds in which a and b send SIZE bytes to each other at once.

Prints the wall time and each direction's bytes and packets from `tc -s qdisc` (the bytes tbf
charged to its tokens), beside the frame bytes of sim/engine/net.c's wire model (NET_WIRE_TCP with
msg_bytes 0): payload + 66 per 1448-byte segment, plus, two-way, one 66-byte ACK per two
segments of the reverse message. The namespaces are removed at the end.

usage: sudo scripts/tbf-probe.py [RATE_MBIT [SIZE [ROUNDS [CC]]]]   (default 20 264192 16; CC:
       the sockets' congestion control, default the host's)
"""
import os
import select
import socket
import subprocess
import sys
import time

NS = ("tbfprobe-a", "tbfprobe-b")
IP = ("10.254.77.1", "10.254.77.2")
PORT = 7499


def sh(cmd):
    subprocess.run(cmd, shell=True, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def up(rate_mbit):
    burst = max(3100, int(rate_mbit * 1e6 / 8 / 1000))
    down()
    for n, ip in zip(NS, IP):
        sh(f"ip netns add {n} && ip -n {n} link set lo up && ip -n {n} addr add {ip}/32 dev lo")
    sh(f"ip link add tbfpa netns {NS[0]} mtu 1500 type veth peer name tbfpb netns {NS[1]} mtu 1500")
    for n, dev, peer, ip in ((NS[0], "tbfpa", IP[1], IP[0]), (NS[1], "tbfpb", IP[0], IP[1])):
        sh(f"ip -n {n} link set {dev} up && ip -n {n} route add {peer}/32 dev {dev} src {ip}")
        sh(f"ip netns exec {n} tc qdisc add dev {dev} root tbf rate {rate_mbit}mbit burst {burst} latency 1000ms")


def down():
    for n in NS:
        subprocess.run(f"ip netns del {n}", shell=True, stderr=subprocess.DEVNULL)


def counters():
    out = []
    for n, dev in ((NS[0], "tbfpa"), (NS[1], "tbfpb")):
        s = subprocess.run(f"ip netns exec {n} tc -s qdisc show dev {dev}", shell=True, capture_output=True,
                           text=True).stdout.split()
        i = s.index("Sent")
        out.append((int(s[i + 1]), int(s[i + 3])))
    return out


def tune(s, cc):
    if cc:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)


def xfer(s, send_n, recv_n):
    """Sends send_n bytes and receives exactly recv_n, both at once (non-blocking, as mpc_net)."""
    s.setblocking(False)
    buf = bytes(1 << 20)
    sent = got = 0
    while sent < send_n or got < recv_n:
        r, w, _ = select.select([s] if got < recv_n else [], [s] if sent < send_n else [], [])
        if w:
            try:
                sent += s.send(buf[:min(len(buf), send_n - sent)])
            except BlockingIOError:
                pass
        if r:
            try:
                d = s.recv(min(1 << 20, recv_n - got))
            except BlockingIOError:
                continue
            if not d:
                sys.exit(f"tbf-probe: connection closed after {got} of {recv_n} bytes")
            got += len(d)


def session(role, mode, size, rounds, cc):
    if role == "b":
        lst = socket.socket()
        lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lst.bind((IP[1], PORT))
        lst.listen(1)
        s, _ = lst.accept()
    else:
        s = socket.socket()
        for _ in range(200):
            try:
                s.connect((IP[1], PORT))
                break
            except OSError:
                time.sleep(0.02)
    tune(s, cc)
    t0 = time.monotonic()
    for _ in range(rounds):
        if mode == "one-way":
            xfer(s, size if role == "a" else 1, 1 if role == "a" else size)
        else:
            xfer(s, size, size)
    xfer(s, 1, 1)  # both ends done
    if role == "a":
        print(f"{time.monotonic() - t0:.4f}")
    s.close()


def model(size, rounds, two_way):
    segs = -(-size // 1448)
    per = size + 66 * segs + (66 * (segs // 2) if two_way else 0)
    return per * rounds


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--node":
        _, _, role, mode, size, rounds, cc = sys.argv
        session(role, mode, int(size), int(rounds), cc if cc != "-" else None)
        return
    rate = float(sys.argv[1]) if len(sys.argv) > 1 else 20
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 264192
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    cc = sys.argv[4] if len(sys.argv) > 4 else "-"
    if os.geteuid() != 0:
        sys.exit("tbf-probe: needs root (network namespaces, tc)")
    with open("/proc/loadavg") as f:
        print(f"load average {' '.join(f.read().split()[:3])}; tbf {rate:g} Mbit/s, {rounds} x {size} bytes, "
              f"congestion control {cc if cc != '-' else 'the host default'}")
    up(rate)
    try:
        for mode in ("one-way", "two-way"):
            c0 = counters()
            me = os.path.abspath(__file__)
            b = subprocess.Popen(["ip", "netns", "exec", NS[1], sys.executable, me, "--node", "b", mode, str(size),
                                  str(rounds), cc])
            a = subprocess.run(["ip", "netns", "exec", NS[0], sys.executable, me, "--node", "a", mode, str(size),
                                str(rounds), cc], capture_output=True, text=True, check=True)
            b.wait()
            c1 = counters()
            t = float(a.stdout.split()[-1])
            ab = (c1[0][0] - c0[0][0], c1[0][1] - c0[0][1])
            ba = (c1[1][0] - c0[1][0], c1[1][1] - c0[1][1])
            frames = model(size, rounds, mode == "two-way")
            busiest = max(ab[0], ba[0])
            print(f"{mode}: {t:.3f} s; a->b {ab[0]} bytes in {ab[1]} packets, b->a {ba[0]} bytes in {ba[1]} "
                  f"packets; wire model a->b {frames} bytes ({100.0 * (ab[0] - frames) / frames:+.2f} %); "
                  f"busiest direction at the rate {busiest * 8 / (rate * 1e6):.3f} s, link idle "
                  f"{100.0 * (1 - busiest * 8 / (rate * 1e6) / t):.1f} % of the time")
    finally:
        down()


if __name__ == "__main__":
    main()
