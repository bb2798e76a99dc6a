"""The rotary helpers of Hugging Face's Llama, as its modeling code defines them: channels i and
i + d/2 of a head rotate together (rotate_half)."""
import torch


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    """q: (B, H, T, d), k: (B, Hkv, T, d), cos/sin: (B, T, d)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
