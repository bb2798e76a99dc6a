#!/usr/bin/env python3
"""mpcsim_trace_io — write and verify mpcsim trace directories with NumPy only.

The format is sim/trace/TRACE_FORMAT.md: manifest.yaml (`format: mpcsim-trace 1`) plus one .npy per
array (little-endian float32 / int32, C order). scripts/dump_trace.py uses TraceWriter to dump
a PyTorch model; mpcsim's own tests use it to build fixtures, so this writer is exercised even
where torch is absent.

    python3 scripts/mpcsim_trace_io.py verify DIR [--tol 1e-5]
        checks shapes, that attention rows sum to 1 and are zero above the diagonal, and that
        softmax(q·k/sqrt(d)) reproduces att within the tolerance
    python3 scripts/mpcsim_trace_io.py fixture DIR [--tokens T] [--seed S]
        writes a small random but self-consistent trace (att computed from q and k)
"""
import argparse
import os
import sys

import numpy as np

FORMAT = "mpcsim-trace 1"
ARRAYS = ("q", "k", "v", "att", "ffn", "logits", "wo", "tokens")


def array_shapes(shape):
    """Expected shape of every array for a shape dict (n_layers, n_heads, ...)."""
    L, T = shape["n_layers"], shape["n_tokens"]
    H, Hk, d = shape["n_heads"], shape["n_kv_heads"], shape["head_dim"]
    return {
        "q": (L, T, H, d),
        "k": (L, T, Hk, d),
        "v": (L, T, Hk, d),
        "att": (L, T, H, T),
        "ffn": (L, T, shape.get("ffn_dim", 0)),
        "logits": (T, shape.get("vocab", 0)),
        "wo": (L, shape.get("dim", 0), H * d),
        "tokens": (T,),
    }


class TraceWriter:
    """Writes a trace position by position without holding it in memory.

    Arrays are created with numpy.lib.format.open_memmap (a valid .npy on disk, filled in
    place), so a long trace never has to fit in RAM."""

    def __init__(self, out_dir, model, shape, arrays, source="pytorch", *, rope_layout):
        """rope_layout: the channel order of q and k, "interleaved" (pairs 2i, 2i+1: llama2.c,
        Meta) or "half" (pairs i, i + d/2: Hugging Face's rotate_half). Required: a trace
        whose order is unknown cannot be combined with a model's own keys."""
        if rope_layout not in ("interleaved", "half"):
            raise ValueError("rope_layout must be 'interleaved' or 'half', got %r" % rope_layout)
        self.rope_layout = rope_layout
        self.dir = out_dir
        self.model = model
        self.shape = dict(shape)
        self.source = source
        want = set(arrays) | {"tokens"}
        if not self.shape.get("vocab"):
            want.discard("logits")
        for need in ("q", "k", "v"):
            if need not in want:
                raise ValueError("a trace needs q, k and v")
        self.arrays = [a for a in ARRAYS if a in want]
        os.makedirs(out_dir, exist_ok=True)
        shapes = array_shapes(self.shape)
        self.mm = {}
        for a in self.arrays:
            dtype = np.int32 if a == "tokens" else np.float32
            self.mm[a] = np.lib.format.open_memmap(
                os.path.join(out_dir, a + ".npy"), mode="w+", dtype=np.dtype(dtype).newbyteorder("<"),
                shape=shapes[a])  # a new file reads as zeros; untouched pages stay sparse

    def tokens(self, ids):
        self.mm["tokens"][: len(ids)] = np.asarray(ids, dtype=np.int32)

    def row(self, layer, pos, q=None, k=None, v=None, att=None, ffn=None):
        """q: (H, d); k, v: (Hkv, d); att: (H, pos+1); ffn: (F,)."""
        for name, val in (("q", q), ("k", k), ("v", v), ("ffn", ffn)):
            if val is not None and name in self.mm:
                self.mm[name][layer, pos] = val
        if att is not None and "att" in self.mm:
            self.mm["att"][layer, pos, :, : pos + 1] = att

    def logits(self, pos, values):
        if "logits" in self.mm:
            self.mm["logits"][pos] = values

    def wo(self, layer, w):
        """w: (dim, H*d), y = W_o @ attention_output (PyTorch o_proj.weight layout)."""
        if "wo" in self.mm:
            self.mm["wo"][layer] = w

    def close(self):
        for m in self.mm.values():
            m.flush()
        self.mm = {}
        s = self.shape
        shapes = array_shapes(s)
        tok = np.load(os.path.join(self.dir, "tokens.npy"))
        lines = [
            "# mpcsim trace manifest (sim/trace/TRACE_FORMAT.md)",
            "format: " + FORMAT,
            "model: " + self.model,
            "source: " + self.source,
        ]
        for key in ("n_layers", "n_heads", "n_kv_heads", "head_dim", "dim", "ffn_dim", "vocab",
                    "n_tokens"):
            lines.append("%s: %d" % (key, s.get(key, 0)))
        lines += ["rope: applied", "rope_layout: " + self.rope_layout, "att_layout: full",
                  "tokens: [" + ", ".join(str(int(x)) for x in tok) + "]", "arrays:"]
        for a in self.arrays:
            dt = "int32" if a == "tokens" else "float32"
            lines.append("  %s: {file: %s.npy, dtype: %s, shape: [%s]}"
                         % (a, a, dt, ", ".join(str(x) for x in shapes[a])))
        with open(os.path.join(self.dir, "manifest.yaml"), "w") as f:
            f.write("\n".join(lines) + "\n")


def read_manifest(d):
    """Flat reader for the keys this module writes (no YAML dependency)."""
    m = {"arrays": []}
    in_arrays = False
    with open(os.path.join(d, "manifest.yaml")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            if line.startswith("  ") and in_arrays:
                m["arrays"].append(line.strip().split(":")[0])
                continue
            in_arrays = False
            key, _, val = line.partition(":")
            val = val.strip()
            if key == "arrays":
                in_arrays = True
            elif key == "tokens":
                m[key] = [int(x) for x in val.strip("[]").split(",") if x.strip()]
            else:
                m[key] = int(val) if val.isdigit() else val
    if m.get("rope_layout", "interleaved") not in ("interleaved", "half"):
        raise ValueError("%s/manifest.yaml: rope_layout %r (interleaved or half)"
                         % (d, m.get("rope_layout")))
    if m.get("format") != FORMAT:
        raise ValueError("%s/manifest.yaml: format %r, expected %r (regenerate the trace)"
                         % (d, m.get("format"), FORMAT))
    return m


def softmax_att(q, k):
    """att[L][T][H][T] = causal softmax(q·k/sqrt(d)) with GQA head sharing, in float64."""
    L, T, H, d = q.shape
    G = H // k.shape[2]
    kk = np.repeat(k, G, axis=2).astype(np.float64)            # L T H d
    s = np.einsum("lthd,lshd->lths", q.astype(np.float64), kk) / np.sqrt(d)
    mask = np.triu(np.ones((T, T), dtype=bool), 1)[None, :, None, :]
    s = np.where(mask, -np.inf, s)
    s -= s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    return p / p.sum(axis=-1, keepdims=True)


def verify(d, tol=1e-5):
    """Returns a list of problems (empty when the trace is consistent)."""
    m = read_manifest(d)
    shapes = array_shapes(m)
    bad = []
    arrs = {}
    for a in m["arrays"]:
        x = np.load(os.path.join(d, a + ".npy"), mmap_mode="r")
        want_dt = np.int32 if a == "tokens" else np.float32
        if x.dtype != np.dtype(want_dt) or x.shape != shapes[a]:
            bad.append("%s: %s %s, expected %s %s" % (a, x.dtype, x.shape, np.dtype(want_dt),
                                                      shapes[a]))
        arrs[a] = x
    if "tokens" in arrs and "tokens" in m and list(arrs["tokens"]) != m["tokens"]:
        bad.append("tokens.npy differs from the manifest's token list")
    if "att" in arrs and not bad:
        att = np.asarray(arrs["att"], dtype=np.float64)
        sums = att.sum(axis=-1)
        if np.abs(sums - 1).max() > tol:
            bad.append("att rows do not sum to 1 (max error %g)" % np.abs(sums - 1).max())
        T = att.shape[1]
        upper = np.triu(np.ones((T, T), dtype=bool), 1)[None, :, None, :]
        if np.abs(np.where(upper, att, 0)).max() != 0:
            bad.append("att has nonzeros above the diagonal")
        ref = softmax_att(np.asarray(arrs["q"]), np.asarray(arrs["k"]))
        err = np.abs(ref - att).max()
        if err > tol:
            bad.append("softmax(q.k/sqrt(d)) differs from att by %g (> %g)" % (err, tol))
    return bad


def write_fixture(d, T=24, seed=7, model="fixture", with_att=True):
    """A random, self-consistent trace: L=2, H=4, Hkv=2, d=8, dim=32, F=16, V=11."""
    rng = np.random.default_rng(seed)
    shape = dict(n_layers=2, n_heads=4, n_kv_heads=2, head_dim=8, dim=32, ffn_dim=16,
                 vocab=11, n_tokens=T)
    L, H, Hk, d_ = 2, 4, 2, 8
    q = rng.standard_normal((L, T, H, d_)).astype(np.float32)
    k = rng.standard_normal((L, T, Hk, d_)).astype(np.float32)
    v = rng.standard_normal((L, T, Hk, d_)).astype(np.float32)
    att = softmax_att(q, k).astype(np.float32)
    arrays = [a for a in ARRAYS if with_att or a != "att"]
    w = TraceWriter(d, model, shape, arrays, source="numpy-fixture", rope_layout="interleaved")
    w.tokens(rng.integers(0, 11, T))
    for l in range(L):
        w.wo(l, rng.standard_normal((32, H * d_)).astype(np.float32))
        for t in range(T):
            w.row(l, t, q=q[l, t], k=k[l, t], v=v[l, t], att=att[l, t, :, : t + 1],
                  ffn=rng.standard_normal(16).astype(np.float32))
    for t in range(T):
        w.logits(t, rng.standard_normal(11).astype(np.float32))
    w.close()
    return q, k, v, att


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    vp = sub.add_parser("verify")
    vp.add_argument("dir")
    vp.add_argument("--tol", type=float, default=1e-5)
    fp = sub.add_parser("fixture")
    fp.add_argument("dir")
    fp.add_argument("--tokens", type=int, default=24)
    fp.add_argument("--seed", type=int, default=7)
    fp.add_argument("--no-att", action="store_true", help="leave att out (readers recompute it)")
    a = ap.parse_args(argv)
    if a.cmd == "verify":
        try:
            bad = verify(a.dir, a.tol)
        except (OSError, ValueError) as ex:
            print("error: %s" % ex, file=sys.stderr)
            return 2
        for b in bad:
            print("error: " + b, file=sys.stderr)
        if not bad:
            print("ok: %s" % a.dir)
        return 1 if bad else 0
    write_fixture(a.dir, a.tokens, a.seed, with_att=not a.no_att)
    print("wrote fixture %s" % a.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
