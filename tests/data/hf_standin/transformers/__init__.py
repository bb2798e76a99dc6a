"""A stand-in for the parts of Hugging Face `transformers` that scripts/dump_trace.py's `hf`
front end uses, for tests on machines without transformers (Debian does not package it).

`from_pretrained(PATH)` takes a llama2.c checkpoint and builds a model with Hugging Face's
module names and conventions: W_q and W_k rows permuted as Hugging Face's Llama checkpoint
converter does, so that its rotate_half RoPE computes the same attention as llama2.c's
interleaved one, and q/k come out in the `half` channel order. The tokenizer is the
checkpoint's llama2.c tokenizer (tok512.bin beside it)."""
import os
import sys
import types

import torch
from torch import nn
from torch.nn import functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "..", "scripts"))
import dump_trace  # noqa: E402

from .models.llama.modeling_llama import apply_rotary_pos_emb  # noqa: E402


def _permute(w, n_heads):
    """Interleaved pairs (2i, 2i+1) of each head's rows → (i, i + d/2)."""
    dim1, dim2 = w.shape
    return w.reshape(n_heads, dim1 // n_heads // 2, 2, dim2).swapaxes(1, 2).reshape(dim1, dim2)


def _lin(w):
    m = nn.Linear(w.shape[1], w.shape[0], bias=False)
    m.weight.data = torch.from_numpy(w.copy())
    return m


class _RMSNorm(nn.Module):
    def __init__(self, w, eps=1e-5):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.from_numpy(w.copy())), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class _Rotary(nn.Module):
    def __init__(self, d, theta=10000.0):
        super().__init__()
        self.d, self.theta = d, theta

    def forward(self, x, positions):
        i = torch.arange(0, self.d, 2, dtype=torch.float32)
        inv = 1.0 / torch.pow(torch.tensor(self.theta, dtype=torch.float32), i / self.d)
        ang = positions[..., None].float() * inv
        emb = torch.cat((ang, ang), dim=-1)
        return torch.cos(emb), torch.sin(emb)


class _Attention(nn.Module):
    def __init__(self, c, t, l):
        super().__init__()
        self.H, self.Hk, self.d = c["n_heads"], c["n_kv_heads"], c["head_dim"]
        self.q_proj = _lin(_permute(t["wq"][l], self.H))
        self.k_proj = _lin(_permute(t["wk"][l], self.Hk))
        self.v_proj, self.o_proj = _lin(t["wv"][l]), _lin(t["wo"][l])

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.H, self.d).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.Hk, self.d).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.Hk, self.d).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        g = self.H // self.Hk
        k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        s = q @ k.transpose(-1, -2) / self.d ** 0.5
        s = s.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
        p = F.softmax(s, dim=-1)
        return self.o_proj((p @ v).transpose(1, 2).reshape(B, T, -1)), p


class _MLP(nn.Module):
    def __init__(self, t, l):
        super().__init__()
        self.gate_proj, self.down_proj = _lin(t["w1"][l]), _lin(t["w2"][l])
        self.up_proj = _lin(t["w3"][l])

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class _Layer(nn.Module):
    def __init__(self, c, t, l):
        super().__init__()
        self.input_layernorm = _RMSNorm(t["rms_att"][l])
        self.post_attention_layernorm = _RMSNorm(t["rms_ffn"][l])
        self.self_attn, self.mlp = _Attention(c, t, l), _MLP(t, l)

    def forward(self, x, cos, sin):
        a, p = self.self_attn(self.input_layernorm(x), cos, sin)
        x = x + a
        return x + self.mlp(self.post_attention_layernorm(x)), p


class _Inner(nn.Module):
    def __init__(self, c, t):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab"], c["dim"])
        self.embed_tokens.weight.data = torch.from_numpy(t["tok"].copy())
        self.layers = nn.ModuleList(_Layer(c, t, l) for l in range(c["n_layers"]))
        self.norm = _RMSNorm(t["rms_final"])
        self.rotary_emb = _Rotary(c["head_dim"])


class _CausalLM(nn.Module):
    def __init__(self, c, t):
        super().__init__()
        self.model, self.lm_head = _Inner(c, t), _lin(t["wcls"])
        self.config = types.SimpleNamespace(
            num_attention_heads=c["n_heads"], num_key_value_heads=c["n_kv_heads"],
            head_dim=c["head_dim"], hidden_size=c["dim"], intermediate_size=c["hidden"],
            num_hidden_layers=c["n_layers"], vocab_size=c["vocab"])

    def forward(self, ids, output_attentions=False, use_cache=False):
        x = self.model.embed_tokens(ids)
        pos = torch.arange(ids.shape[1])[None, :]
        cos, sin = self.model.rotary_emb(x, pos)
        atts = []
        for layer in self.model.layers:
            x, p = layer(x, cos, sin)
            atts.append(p)
        logits = self.lm_head(self.model.norm(x))
        return types.SimpleNamespace(logits=logits,
                                     attentions=tuple(atts) if output_attentions else None)


class AutoModelForCausalLM:
    @staticmethod
    def from_pretrained(path, torch_dtype=None, attn_implementation=None):
        c, t = dump_trace.read_llama2c(path)
        return _CausalLM(c, t)


class AutoTokenizer:
    @staticmethod
    def from_pretrained(path):
        c, _ = dump_trace.read_llama2c(path)
        tok = dump_trace.Llama2cTokenizer(os.path.join(os.path.dirname(path), "tok512.bin"),
                                          c["vocab"])

        def encode(text, return_tensors=None):
            ids = tok.encode_prefix(text, 512)
            return types.SimpleNamespace(input_ids=torch.tensor([ids]))
        return encode
