#!/usr/bin/env python3
"""dump_trace.py — dump an mpcsim trace (sim/trace/TRACE_FORMAT.md) from a PyTorch model.

Needs torch only (Debian: python3-torch, python3-numpy). Three ways in:

  llama2.c checkpoint + tokenizer (torch only):
    python3 scripts/dump_trace.py llama2c --checkpoint models/stories260K/stories260K.bin \\
        --tokenizer models/stories260K/tok512.bin --text prompt.txt --max-tokens 256 -o tr/
  Hugging Face causal LM (needs transformers, which Debian does not package):
    python3 scripts/dump_trace.py hf --model meta-llama/Llama-2-7b-hf --text prompt.txt \\
        --max-tokens 1024 -o tr/ [--no-att] [--no-logits] [--dtype float32]
  any torch.nn.Module, from Python: name the modules whose outputs are q and k after RoPE,
  v, the attention probabilities, the FFN gate pre-activation and the logits:
    from dump_trace import Taps, dump_module
    taps = Taps(q="blocks.{l}.attn.rope:0", k="blocks.{l}.attn.rope:1", v="blocks.{l}.attn.v",
                att="blocks.{l}.attn.probs", ffn="blocks.{l}.mlp.gate", logits="head",
                layout=dict(q="bthd", k="bthd", v="btf", att="bhts", ffn="btf", logits="btv"))
    dump_module(model, ids, taps, shape, "tr/", model_name="mine", rope_layout="interleaved",
                wo=lambda l: model.blocks[l].attn.out.weight)

Then: `mpcsim trace info --verify tr/` (checks the trace against itself and, for stories260K,
against mpcsim's own forward pass), `mpcsim trace fit tr/ -o params.yaml`.

A tap is "MODULE.PATH[:INDEX]": `{l}` stands for the layer number, INDEX picks one tensor of a
module that returns a tuple. Layouts (batch 1): q/k/v "bthd" (batch, position, head, channel),
"bhtd", or "btf" (heads flattened); att "bhts" (head, query position, key position); ffn "btf";
logits "btv". rope_layout says how the model pairs channels in its rotary embedding:
"interleaved" (channels 2i and 2i+1 rotate together: llama2.c, Meta's reference code) or "half"
(channels i and i + d/2: Hugging Face's rotate_half). It is written to the manifest and mpcsim
converts on read; naming the wrong one is caught by `trace info --verify` when the model's
weights are at hand, and by any run that combines the trace with the model's live metrics.

Keep masks of your own policy implementation (--keep-masks FILE.py, or keep= from Python):
FILE.py defines keep_masks(layer, q, k, v, att) -> a 0/1 array [T][Hkv][T], row t the cached
positions j < t that layer's KV heads keep at position t (entries j >= t are ignored). q is
[T][H][d], k and v [T][Hkv][d], att [T][H][T] or None (--no-att), all NumPy float32 arrays as
the trace stores them. They are written to keep.npy beside the trace, which mpcsim's policy
replay_masks replays (sim/trace/TRACE_FORMAT.md "Keep masks").

Large traces: att is L·T·H·T floats (4 GiB for a 7B model at 1K tokens): pass --no-att and
mpcsim computes attention rows from q and k. Arrays are written through numpy memmaps.
"""
import argparse
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mpcsim_trace_io import TraceWriter  # noqa: E402  (shared with mpcsim's tests)

ROPE_LAYOUTS = ("interleaved", "half")


def _torch():
    try:
        import torch
    except ImportError as ex:
        raise SystemExit("error: %s (dump_trace.py needs torch: apt-get install python3-torch)"
                         % ex)
    return torch


# ---- the generic dumper --------------------------------------------------------------------

class Taps:
    """Where each array comes from: module names (with {l}) and the layout of their outputs."""

    def __init__(self, q, k, v, att=None, ffn=None, logits=None, layout=None):
        self.names = {"q": q, "k": k, "v": v, "att": att, "ffn": ffn, "logits": logits}
        self.layout = dict(q="bthd", k="bthd", v="bthd", att="bhts", ffn="btf", logits="btv")
        self.layout.update(layout or {})


def _split(spec):
    name, _, idx = spec.partition(":")
    return name, int(idx) if idx else None


def _as_rows(x, layout, T, heads, d):
    """(T, heads, d) for q/k/v from any of the supported layouts (batch 1)."""
    x = x[0]
    if layout == "bthd":
        return x.reshape(T, heads, d)
    if layout == "bhtd":
        return x.reshape(heads, T, d).transpose(0, 1)
    if layout == "btf":
        return x.reshape(T, heads, d)
    raise ValueError("unknown q/k/v layout %r (bthd, bhtd or btf)" % layout)


def load_keep_masks(path, name="keep_masks"):
    """The function `name` of the Python file at path (--keep-masks)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("mpcsim_keep_masks", path)
    if spec is None or spec.loader is None:
        raise ValueError("%s: not a Python file" % path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise ValueError("%s defines no function %s(layer, q, k, v, att)" % (path, name))
    return fn


class KeepWriter:
    """keep.npy beside the trace: int32 [L][T][Hkv][T], 0/1 (TRACE_FORMAT.md "Keep masks")."""

    def __init__(self, out, L, T, Hk, fn):
        import numpy as np
        self.np, self.fn, self.T, self.Hk = np, fn, T, Hk
        self.path = os.path.join(out, "keep.npy")
        self.arr = np.lib.format.open_memmap(self.path, mode="w+", dtype="<i4",
                                             shape=(L, T, Hk, T))
        self.below = np.tril(np.ones((T, T), dtype=bool), -1)[:, None, :]  # j < t

    def layer(self, l, q, k, v, att):
        np = self.np
        m = np.asarray(self.fn(l, q, k, v, att))
        if m.shape != (self.T, self.Hk, self.T):
            raise ValueError("keep_masks(layer %d) returned shape %s, expected [T][Hkv][T] = %s"
                             % (l, m.shape, (self.T, self.Hk, self.T)))
        m = np.where(self.below, m, 0)
        bad = np.argwhere((m != 0) & (m != 1))
        if len(bad):
            t, g, j = bad[0]
            raise ValueError("keep_masks(layer %d)[%d][%d][%d] = %r; a keep mask holds 0 or 1"
                             % (l, t, g, j, m[t, g, j]))
        self.arr[l] = m.astype("<i4")

    def close(self):
        self.arr.flush()
        del self.arr


def dump_module(model, ids, taps, shape, out, model_name, rope_layout, wo=None,
                source="pytorch", forward=None, keep=None):
    """Runs model once over ids (a list of token ids) and writes a trace into out.

    shape: n_layers, n_heads, n_kv_heads, head_dim, dim, ffn_dim, vocab (0: no logits).
    wo(l): layer l's output projection (dim × heads·head_dim, y = W_o·o), or None.
    forward(model, ids_tensor) runs the model (default: model(ids_tensor)).
    keep(layer, q, k, v, att): the keep masks of a policy implementation, written to keep.npy
    (see the module's docstring), or None.
    Returns the number of positions written."""
    torch = _torch()
    if rope_layout not in ROPE_LAYOUTS:
        raise ValueError("rope_layout must be one of %s" % (ROPE_LAYOUTS,))
    L, H, Hk, d = shape["n_layers"], shape["n_heads"], shape["n_kv_heads"], shape["head_dim"]
    T = len(ids)
    shape = dict(shape, n_tokens=T)
    want = [a for a, n in taps.names.items() if n] + (["wo"] if wo else []) + ["tokens"]
    if not shape.get("vocab"):
        want = [a for a in want if a != "logits"]
    captured, handles = {}, []

    def grab(key, idx):
        def hook(_mod, _inp, output):
            o = output[idx] if idx is not None else output
            captured[key] = o.detach().float()
        return hook

    for arr, spec in taps.names.items():
        if not spec or arr not in want:
            continue
        name, idx = _split(spec)
        for l in (range(L) if "{l}" in name else [None]):
            mod = model.get_submodule(name.format(l=l) if l is not None else name)
            handles.append(mod.register_forward_hook(grab((arr, l), idx)))
    x = torch.tensor([ids], dtype=torch.long)
    try:
        with torch.no_grad():
            (forward or (lambda m, t: m(t)))(model, x)
    finally:
        for h in handles:
            h.remove()
    w = TraceWriter(out, model_name, shape, want, source=source, rope_layout=rope_layout)
    kw = KeepWriter(out, L, T, Hk, keep) if keep else None
    w.tokens(ids)
    lay = taps.layout
    for l in range(L):
        if wo:
            w.wo(l, wo(l).detach().float().numpy())
        q = _as_rows(captured.pop(("q", l)), lay["q"], T, H, d).numpy()
        k = _as_rows(captured.pop(("k", l)), lay["k"], T, Hk, d).numpy()
        v = _as_rows(captured.pop(("v", l)), lay["v"], T, Hk, d).numpy()
        ffn = captured.pop(("ffn", l), None)
        ffn = ffn[0].reshape(T, -1).numpy() if ffn is not None else None
        att = captured.pop(("att", l), None)
        if att is not None:
            if lay["att"] != "bhts":
                raise ValueError("att layout must be bhts")
            att = att[0].numpy()
        for t in range(T):
            w.row(l, t, q=q[t], k=k[t], v=v[t], ffn=ffn[t] if ffn is not None else None,
                  att=att[:, t, : t + 1] if att is not None else None)
        if kw:
            kw.layer(l, q, k, v, att.transpose(1, 0, 2) if att is not None else None)
    lg = captured.pop(("logits", None), None)
    if lg is not None:
        lg = lg[0].reshape(T, -1).numpy()
        for t in range(T):
            w.logits(t, lg[t])
    w.close()
    if kw:
        kw.close()
    return T


# ---- llama2.c: checkpoint, tokenizer, model ------------------------------------------------

def read_llama2c(path):
    """(config dict, {tensor name: float32 numpy array}) of a llama2.c checkpoint: the legacy
    version-0 layout (run.c) or export.py's version 1 (magic "ak42", fp32)."""
    import numpy as np
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) >= 8 and struct.unpack_from("<I", buf, 0)[0] == 0x616B3432:
        version = struct.unpack_from("<i", buf, 4)[0]
        if version != 1:
            raise ValueError("%s: llama2.c checkpoint version %d (only 0 and 1 are read)"
                             % (path, version))
        dim, hidden, L, H, Hk, vocab, seq = struct.unpack_from("<7i", buf, 8)
        shared = buf[36] != 0
        off = 256
    else:
        dim, hidden, L, H, Hk, vocab, seq = struct.unpack_from("<7i", buf, 0)
        version, shared, off = 0, vocab > 0, 28
        vocab = abs(vocab)
    if min(dim, hidden, L, H, Hk, vocab, seq) <= 0 or dim % H or H % Hk:
        raise ValueError("%s: not a llama2.c checkpoint (header %r)"
                         % (path, (dim, hidden, L, H, Hk, vocab, seq)))
    hd = dim // H
    kvd = Hk * hd
    sizes = {"tok": (vocab, dim), "rms_att": (L, dim), "wq": (L, dim, dim),
             "wk": (L, kvd, dim), "wv": (L, kvd, dim), "wo": (L, dim, dim),
             "rms_ffn": (L, dim), "w1": (L, hidden, dim), "w2": (L, dim, hidden),
             "w3": (L, hidden, dim), "rms_final": (dim,), "freq_real": (seq, hd // 2),
             "freq_imag": (seq, hd // 2)}
    order = (["tok", "rms_att", "wq", "wk", "wv", "wo", "rms_ffn", "w1", "w2", "w3",
              "rms_final", "freq_real", "freq_imag"] if version == 0 else
             ["rms_att", "rms_ffn", "rms_final", "tok", "wq", "wk", "wv", "wo", "w1", "w2",
              "w3"])
    if not shared:
        sizes["wcls"] = (vocab, dim)
        order.append("wcls")
    t = {}
    for name in order:
        n = int(np.prod(sizes[name]))
        if off + 4 * n > len(buf):
            raise ValueError("%s: truncated at tensor %s" % (path, name))
        t[name] = np.frombuffer(buf, dtype="<f4", count=n, offset=off).reshape(sizes[name])
        off += 4 * n
    t.setdefault("wcls", t["tok"])
    cfg = dict(dim=dim, hidden=hidden, n_layers=L, n_heads=H, n_kv_heads=Hk, vocab=vocab,
               seq_len=seq, head_dim=hd, version=version)
    return cfg, t


class Llama2cTokenizer:
    """run.c's encoder: BOS, a dummy-prefix space, one piece per UTF-8 character (bytes + 3
    when the character is not a piece), then greedy merges of the best-scoring adjacent pair."""

    def __init__(self, path, vocab):
        with open(path, "rb") as f:
            buf = f.read()
        (self.max_len,) = struct.unpack_from("<i", buf, 0)
        off, self.pieces, self.scores = 4, [], []
        for _ in range(vocab):
            score, n = struct.unpack_from("<fi", buf, off)
            off += 8
            if n < 0 or off + n > len(buf):
                raise ValueError("%s: not a llama2.c tokenizer for %d pieces" % (path, vocab))
            self.pieces.append(buf[off:off + n])
            self.scores.append(score)
            off += n
        self.index = {}
        for i, p in enumerate(self.pieces):
            self.index.setdefault(p, i)   # a duplicate piece resolves to its first id

    def encode(self, text):
        data = text.encode("utf-8")
        ids = [1]
        if data and b" " in self.index:
            ids.append(self.index[b" "])
        i = 0
        while i < len(data):
            j = i + 1
            while j < len(data) and (data[j] & 0xC0) == 0x80 and j - i < 4:
                j += 1
            cp = data[i:j]
            if cp in self.index:
                ids.append(self.index[cp])
            else:
                ids.extend(b + 3 for b in cp)
            i = j
        while True:
            best, best_i = -1e10, -1
            for k in range(len(ids) - 1):
                m = self.index.get(self.pieces[ids[k]] + self.pieces[ids[k + 1]])
                if m is not None and self.scores[m] > best:
                    best, best_i, best_id = self.scores[m], k, m
            if best_i < 0:
                return ids
            ids[best_i:best_i + 2] = [best_id]

    def encode_prefix(self, text, cap):
        """The ids mpcsim's `trace record` takes: the shortest prefix of text that yields cap
        + 8 ids (merges are local), cut to cap."""
        need = cap * 4 + 64
        data = text.encode("utf-8")
        while True:
            part = data[:need]
            ids = self.encode(part.decode("utf-8", errors="ignore"))
            if len(part) == len(data) or len(ids) >= cap + 8:
                return ids[:cap]
            need *= 2


def llama2c_model(cfg, t, rope_theta=10000.0, norm_eps=1e-5):
    """A torch module computing llama2.c's forward pass, with modules to tap by name:
    layers.{l}.attention.{wq,wk,wv,rope,probs,wo}, layers.{l}.feed_forward.{w1,w2,w3}, output."""
    torch = _torch()
    nn = torch.nn
    F = nn.functional
    D, Hd, H, Hk = cfg["dim"], cfg["head_dim"], cfg["n_heads"], cfg["n_kv_heads"]

    def lin(w):
        m = nn.Linear(w.shape[1], w.shape[0], bias=False)
        m.weight.data = torch.from_numpy(w.copy())
        return m

    class RMSNorm(nn.Module):
        def __init__(self, w):
            super().__init__()
            self.weight = nn.Parameter(torch.from_numpy(w.copy()))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm_eps) * self.weight

    class Rotary(nn.Module):
        """Interleaved RoPE (run.c): channels 2i, 2i+1 of each head rotate by pos·θ^(−2i/d)."""

        def forward(self, q, k):
            T = q.shape[1]
            i = torch.arange(0, Hd, 2, dtype=torch.float32)
            freq = 1.0 / torch.pow(torch.tensor(rope_theta, dtype=torch.float32), i / Hd)
            ang = torch.arange(T, dtype=torch.float32)[:, None] * freq[None, :]
            cos, sin = torch.cos(ang)[None, :, None, :], torch.sin(ang)[None, :, None, :]

            def rot(x):
                x0, x1 = x[..., 0::2], x[..., 1::2]
                return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), -1).flatten(-2)
            return rot(q), rot(k)

    class Probs(nn.Module):
        def forward(self, p):
            return p

    class Attention(nn.Module):
        def __init__(self, l):
            super().__init__()
            self.wq, self.wk = lin(t["wq"][l]), lin(t["wk"][l])
            self.wv, self.wo = lin(t["wv"][l]), lin(t["wo"][l])
            self.rope, self.probs = Rotary(), Probs()

        def forward(self, x):
            B, T, _ = x.shape
            q = self.wq(x).view(B, T, H, Hd)
            k = self.wk(x).view(B, T, Hk, Hd)
            v = self.wv(x).view(B, T, Hk, Hd)
            q, k = self.rope(q, k)
            k = k.repeat_interleave(H // Hk, dim=2)
            vv = v.repeat_interleave(H // Hk, dim=2)
            s = torch.einsum("bthd,bshd->bhts", q, k) / (Hd ** 0.5)
            mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
            p = self.probs(F.softmax(s.masked_fill(mask, float("-inf")), dim=-1))
            o = torch.einsum("bhts,bshd->bthd", p, vv).reshape(B, T, H * Hd)
            return self.wo(o)

    class FeedForward(nn.Module):
        def __init__(self, l):
            super().__init__()
            self.w1, self.w2, self.w3 = lin(t["w1"][l]), lin(t["w2"][l]), lin(t["w3"][l])

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class Block(nn.Module):
        def __init__(self, l):
            super().__init__()
            self.attention_norm, self.ffn_norm = RMSNorm(t["rms_att"][l]), RMSNorm(t["rms_ffn"][l])
            self.attention, self.feed_forward = Attention(l), FeedForward(l)

        def forward(self, x):
            x = x + self.attention(self.attention_norm(x))
            return x + self.feed_forward(self.ffn_norm(x))

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_embeddings = nn.Embedding(cfg["vocab"], D)
            self.tok_embeddings.weight.data = torch.from_numpy(t["tok"].copy())
            self.layers = nn.ModuleList(Block(l) for l in range(cfg["n_layers"]))
            self.norm = RMSNorm(t["rms_final"])
            self.output = lin(t["wcls"])

        def forward(self, ids):
            x = self.tok_embeddings(ids)
            for b in self.layers:
                x = b(x)
            return self.output(self.norm(x))

    return Llama().eval()


LLAMA2C_TAPS = Taps(q="layers.{l}.attention.rope:0", k="layers.{l}.attention.rope:1",
                    v="layers.{l}.attention.wv", att="layers.{l}.attention.probs",
                    ffn="layers.{l}.feed_forward.w1", logits="output",
                    layout=dict(q="bthd", k="bthd", v="btf", att="bhts", ffn="btf",
                                logits="btv"))


def dump_llama2c(checkpoint, tokenizer, text, max_tokens, out, model_name="stories260K",
                 want_att=True, want_logits=True, rope_theta=10000.0, keep=None):
    cfg, t = read_llama2c(checkpoint)
    tok = Llama2cTokenizer(tokenizer, cfg["vocab"])
    ids = tok.encode_prefix(text, min(max_tokens, cfg["seq_len"]))
    model = llama2c_model(cfg, t, rope_theta)
    taps = Taps(**{a: n for a, n in LLAMA2C_TAPS.names.items()
                   if (a != "att" or want_att) and (a != "logits" or want_logits)},
                layout=LLAMA2C_TAPS.layout)
    shape = dict(n_layers=cfg["n_layers"], n_heads=cfg["n_heads"],
                 n_kv_heads=cfg["n_kv_heads"], head_dim=cfg["head_dim"], dim=cfg["dim"],
                 ffn_dim=cfg["hidden"], vocab=cfg["vocab"] if want_logits else 0)
    return dump_module(model, ids, taps, shape, out, model_name, "interleaved",
                       wo=lambda l: model.layers[l].attention.wo.weight, keep=keep)


# ---- Hugging Face --------------------------------------------------------------------------

def dump_hf(model_name, text, max_tokens, out, want_att=True, want_logits=True,
            dtype="float32", name=None, keep=None):
    """Models with the Llama module layout (LlamaForCausalLM, MistralForCausalLM, Qwen2…).
    q and k are the q_proj/k_proj outputs rotated with the model's own rotary embedding, in
    its rotate_half channel order (rope_layout: half)."""
    torch = _torch()
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    except ImportError as ex:
        raise SystemExit("error: %s (the hf front end needs transformers; the llama2c front "
                         "end and dump_module need torch only)" % ex)
    tok = AutoTokenizer.from_pretrained(model_name)
    model = AutoModelForCausalLM.from_pretrained(
        model_name, torch_dtype=getattr(torch, dtype), attn_implementation="eager")
    model.eval()
    cfg = model.config
    ids = tok(text, return_tensors="pt").input_ids[0, :max_tokens].tolist()
    H = cfg.num_attention_heads
    Hk = getattr(cfg, "num_key_value_heads", H)
    d = getattr(cfg, "head_dim", None) or cfg.hidden_size // H
    layers = model.model.layers
    T = len(ids)
    positions = torch.arange(T)[None, :]
    rot = getattr(model.model, "rotary_emb", None)

    class Roped(torch.nn.Module):
        """q_proj and k_proj outputs after the model's rotary embedding, as one tap."""

        def forward(self, q, k, layer):
            q = q.view(1, T, H, d).transpose(1, 2)
            k = k.view(1, T, Hk, d).transpose(1, 2)
            cos, sin = (rot or layer.self_attn.rotary_emb)(k, positions)
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
            return q.transpose(1, 2), k.transpose(1, 2)

    roped, cap = Roped(), {}

    def forward(m, x):
        hooks = []
        for l, layer in enumerate(layers):
            a = layer.self_attn
            hooks.append(a.q_proj.register_forward_hook(
                lambda _m, _i, o, l=l: cap.__setitem__(("q", l), o)))
            hooks.append(a.k_proj.register_forward_hook(
                lambda _m, _i, o, l=l: cap.__setitem__(("k", l), o)))
        try:
            res = m(x, output_attentions=want_att, use_cache=False)
        finally:
            for h in hooks:
                h.remove()
        for l, layer in enumerate(layers):
            q, k = roped(cap.pop(("q", l)), cap.pop(("k", l)), layer)
            m._mpcsim_qk[l] = (q, k)
            if want_att:
                m._mpcsim_att[l] = res.attentions[l]
        return res

    class Tap(torch.nn.Module):
        def forward(self, x):
            return x

    model._mpcsim_qk, model._mpcsim_att = {}, {}
    taps_mod = torch.nn.ModuleDict({"qk%d" % l: Tap() for l in range(len(layers))})
    taps_mod.update({"att%d" % l: Tap() for l in range(len(layers))})
    model.add_module("mpcsim_taps", taps_mod)

    def run(m, x):
        res = forward(m, x)
        for l in range(len(layers)):
            taps_mod["qk%d" % l](m._mpcsim_qk[l])
            if want_att:
                taps_mod["att%d" % l](m._mpcsim_att[l])
        return res

    taps = Taps(q="mpcsim_taps.qk{l}:0", k="mpcsim_taps.qk{l}:1",
                v="model.layers.{l}.self_attn.v_proj",
                att="mpcsim_taps.att{l}" if want_att else None,
                ffn="model.layers.{l}.mlp.gate_proj", logits="lm_head" if want_logits else None,
                layout=dict(q="bthd", k="bthd", v="btf", att="bhts", ffn="btf", logits="btv"))
    shape = dict(n_layers=cfg.num_hidden_layers, n_heads=H, n_kv_heads=Hk, head_dim=d,
                 dim=cfg.hidden_size, ffn_dim=cfg.intermediate_size,
                 vocab=cfg.vocab_size if want_logits else 0)
    return dump_module(model, ids, taps, shape, out, name or model_name, "half",
                       wo=lambda l: layers[l].self_attn.o_proj.weight, forward=run, keep=keep)


# ---- command line --------------------------------------------------------------------------

def main(argv):
    ap = argparse.ArgumentParser(description="dump an mpcsim trace from a PyTorch model")
    sub = ap.add_subparsers(dest="front", required=True)
    lc = sub.add_parser("llama2c", help="a llama2.c checkpoint + tokenizer (torch only)")
    lc.add_argument("--checkpoint", required=True)
    lc.add_argument("--tokenizer", required=True)
    lc.add_argument("--rope-theta", type=float, default=10000.0)
    hf = sub.add_parser("hf", help="a Hugging Face causal LM (needs transformers)")
    hf.add_argument("--model", required=True, help="Hugging Face model id or local path")
    hf.add_argument("--dtype", default="float32")
    for p in (lc, hf):
        p.add_argument("--name", default=None,
                       help="model name in the manifest (default: the checkpoint's file stem, "
                       "or the Hugging Face id); mpcsim compares the trace with a model of that "
                       "name when it has its weights")
        p.add_argument("--text", required=True, help="text file to run the model over")
        p.add_argument("--max-tokens", type=int, default=512)
        p.add_argument("-o", "--output", required=True, help="trace directory to write")
        p.add_argument("--no-att", action="store_true", help="skip att (mpcsim recomputes it)")
        p.add_argument("--no-logits", action="store_true")
        p.add_argument("--keep-masks", metavar="FILE.py", default=None,
                       help="also write keep.npy: the keep masks of the policy that FILE.py's "
                       "keep_masks(layer, q, k, v, att) computes (replayed by mpcsim's policy "
                       "replay_masks)")
    a = ap.parse_args(argv)
    if a.max_tokens < 1:
        ap.error("--max-tokens must be at least 1")
    with open(a.text, encoding="utf-8") as f:
        text = f.read()
    try:
        keep = load_keep_masks(a.keep_masks) if a.keep_masks else None
        if a.front == "llama2c":
            name = a.name or os.path.splitext(os.path.basename(a.checkpoint))[0]
            n = dump_llama2c(a.checkpoint, a.tokenizer, text, a.max_tokens, a.output, name,
                             not a.no_att, not a.no_logits, a.rope_theta, keep)
            src = a.checkpoint
        else:
            n = dump_hf(a.model, text, a.max_tokens, a.output, not a.no_att, not a.no_logits,
                        a.dtype, a.name, keep)
            src = a.model
    except (OSError, ValueError) as ex:
        print("error: %s" % ex, file=sys.stderr)
        return 2
    print("wrote %d tokens of %s into %s" % (n, src, a.output))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
