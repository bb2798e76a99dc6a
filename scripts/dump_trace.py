#!/usr/bin/env python3
"""dump_trace.py — dump an mpcsim trace (sim/trace/TRACE_FORMAT.md) from a Hugging Face causal LM.

Usage (needs torch and transformers, which mpcsim itself does not):

    python3 scripts/dump_trace.py --model meta-llama/Llama-2-7b-hf --text prompt.txt \\
        --max-tokens 1024 -o traces/llama2-7b [--no-att] [--no-logits] [--dtype float32]
    mpcsim trace info traces/llama2-7b
    mpcsim trace fit traces/llama2-7b -o params.yaml   # parameters for synthetic traces

What is recorded, per layer l and position t (one forward pass over the whole text):
  q[l][t][h]  query of head h after RoPE     (hooked from the attention module's q_proj and
  k[l][t][g]  key of KV head g after RoPE     k_proj outputs, rotated with the model's own
  v[l][t][g]  value of KV head g              rotary embedding)
  att[l][t][h][:t+1]  attention probabilities (output_attentions=True; eager attention)
  ffn[l][t]   gate pre-activation (input of the activation: mlp.gate_proj output)
  logits[t]   next-token logits
  wo[l]       o_proj.weight (dim × heads·head_dim, y = W_o·o)
Models with the Llama module layout (LlamaForCausalLM, MistralForCausalLM, Qwen2…) work as
is; for others adapt `layers()` and `rope()`.

Large traces: att is L·T·H·T floats (32·1024·32·1024·4 B = 4 GiB for a 7B model at 1K
tokens); pass --no-att and mpcsim computes attention rows from q and k instead (the same
softmax(q·k/√d) up to float rounding). Arrays are written through numpy memmaps, so memory
stays at one layer's activations.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mpcsim_trace_io import TraceWriter  # noqa: E402  (shared with mpcsim's tests)


def layers(model):
    return model.model.layers


def rope(model, layer, q, k, positions):
    """Applies the model's rotary embedding to q (B,H,T,d) and k (B,Hkv,T,d)."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    rot = getattr(model.model, "rotary_emb", None) or layer.self_attn.rotary_emb
    cos, sin = rot(k, positions)
    return apply_rotary_pos_emb(q, k, cos, sin)


def dump(model_name, text, max_tokens, out, want_att=True, want_logits=True,
         dtype="float32"):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_name)
    model = AutoModelForCausalLM.from_pretrained(
        model_name, torch_dtype=getattr(torch, dtype), attn_implementation="eager")
    model.eval()
    cfg = model.config
    ids = tok(text, return_tensors="pt").input_ids[:, :max_tokens]
    T = ids.shape[1]
    H, Hk = cfg.num_attention_heads, getattr(cfg, "num_key_value_heads", cfg.num_attention_heads)
    d = getattr(cfg, "head_dim", None) or cfg.hidden_size // H
    shape = dict(n_layers=cfg.num_hidden_layers, n_heads=H, n_kv_heads=Hk, head_dim=d,
                 dim=cfg.hidden_size, ffn_dim=cfg.intermediate_size,
                 vocab=cfg.vocab_size if want_logits else 0, n_tokens=T)
    arrays = ["q", "k", "v", "ffn", "wo", "tokens"] + (["att"] if want_att else []) + \
             (["logits"] if want_logits else [])
    w = TraceWriter(out, model_name, shape, arrays, source="pytorch")
    w.tokens(ids[0].tolist())
    captured = {}

    def keep(name, l):
        def hook(_mod, _inp, output):
            captured[(name, l)] = output.detach().float()
        return hook

    handles = []
    for l, layer in enumerate(layers(model)):
        a = layer.self_attn
        handles += [a.q_proj.register_forward_hook(keep("q", l)),
                    a.k_proj.register_forward_hook(keep("k", l)),
                    a.v_proj.register_forward_hook(keep("v", l)),
                    layer.mlp.gate_proj.register_forward_hook(keep("ffn", l))]
        w.wo(l, a.o_proj.weight.detach().float().numpy())
    with torch.no_grad():
        res = model(ids, output_attentions=want_att, use_cache=False)
    for h in handles:
        h.remove()
    positions = torch.arange(T)[None, :]
    for l, layer in enumerate(layers(model)):
        q = captured.pop(("q", l)).view(1, T, H, d).transpose(1, 2)
        k = captured.pop(("k", l)).view(1, T, Hk, d).transpose(1, 2)
        v = captured.pop(("v", l)).view(1, T, Hk, d)
        q, k = rope(model, layer, q, k, positions)
        q = q.transpose(1, 2)[0].numpy()
        k = k.transpose(1, 2)[0].numpy()
        ffn = captured.pop(("ffn", l))[0].numpy()
        att = res.attentions[l][0].float().numpy() if want_att else None  # H, T, T
        for t in range(T):
            w.row(l, t, q=q[t], k=k[t], v=v[0, t].numpy(), ffn=ffn[t],
                  att=att[:, t, : t + 1] if att is not None else None)
    if want_logits:
        lg = res.logits[0].float().numpy()
        for t in range(T):
            w.logits(t, lg[t])
    w.close()
    return T


def main(argv):
    ap = argparse.ArgumentParser(description="dump an mpcsim trace from a Hugging Face LM")
    ap.add_argument("--model", required=True, help="Hugging Face model id or local path")
    ap.add_argument("--text", required=True, help="text file to run the model over")
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("-o", "--output", required=True, help="trace directory to write")
    ap.add_argument("--no-att", action="store_true", help="skip att (mpcsim recomputes it)")
    ap.add_argument("--no-logits", action="store_true")
    ap.add_argument("--dtype", default="float32")
    a = ap.parse_args(argv)
    with open(a.text, encoding="utf-8") as f:
        text = f.read()
    try:
        n = dump(a.model, text, a.max_tokens, a.output, not a.no_att, not a.no_logits, a.dtype)
    except ImportError as ex:
        print("error: %s (dump_trace.py needs torch and transformers)" % ex, file=sys.stderr)
        return 2
    print("wrote %d tokens of %s into %s" % (n, a.model, a.output))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
