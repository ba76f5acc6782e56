#!/usr/bin/env python3
"""Writes the tiny Hugging Face checkpoints that hf_checkpoint_test reads:
a LlamaForCausalLM (grouped-query attention, Llama 3.1 rope scaling, untied
head) and a Qwen3ForCausalLM (QK-norm, head_dim set apart from the width,
tied head), a MixtralForCausalLM (4 experts, top-2; also stored with
transformers 5's fused expert tensors) and a Qwen3MoeForCausalLM (8
experts, top-4, raw gates), each a directory with config.json and model.safetensors as
transformers' save_pretrained writes them, plus expected.json: a token
sequence and the per-token losses transformers computes on it (f32, CPU).

Run by hand, not by the build (transformers is not a weft dependency):
    python3 -m pip install torch transformers safetensors
    python3 models/llama/testdata/make_hf_fixtures.py models/llama/testdata
"""
import json
import os
import shutil
import sys

import safetensors.torch
import torch
import transformers

TOKENS = [3, 17, 5, 60, 22, 8, 41, 0, 13, 7, 55, 31, 2, 19, 44, 9]


def write(out, name, model):
    path = os.path.join(out, name)
    model.save_pretrained(path, safe_serialization=True)
    ids = torch.tensor([TOKENS])
    with torch.no_grad():
        logits = model(ids).logits[0, :-1].float()
    losses = torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="none")
    with open(os.path.join(path, "expected.json"), "w") as f:
        json.dump({"tokens": TOKENS, "losses": [float(x) for x in losses]}, f)
    print(path, "mean loss", float(losses.mean()))


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    llama = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
        rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=False,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 8},
        torch_dtype="float32")
    m = transformers.LlamaForCausalLM(llama).eval()
    for p in m.parameters():  # weights large enough that every path shows
        torch.nn.init.normal_(p, std=0.2) if p.dim() > 1 else torch.nn.init.normal_(p, 1.0, 0.2)
    write(out, "hf_llama_tiny", m)
    qwen = transformers.Qwen3Config(
        vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=32,
        rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True,
        torch_dtype="float32")
    q = transformers.Qwen3ForCausalLM(qwen).eval()
    for p in q.parameters():
        torch.nn.init.normal_(p, std=0.2) if p.dim() > 1 else torch.nn.init.normal_(p, 1.0, 0.2)
    write(out, "hf_qwen3_tiny", q)
    # Mixtures of experts: Mixtral (4 experts, top-2; its Hub layout
    # block_sparse_moe.experts.J.w1/w2/w3, which save_pretrained keeps) and
    # Qwen3-MoE (8 experts of 16, top-4, raw gates, QK-norm).
    mixtral = transformers.MixtralConfig(
        vocab_size=64, hidden_size=32, intermediate_size=24, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
        rms_norm_eps=1e-5, rope_theta=1000000.0, num_local_experts=4, num_experts_per_tok=2,
        sliding_window=None, tie_word_embeddings=False, torch_dtype="float32")
    mx = transformers.MixtralForCausalLM(mixtral).eval()
    for p in mx.parameters():
        torch.nn.init.normal_(p, std=0.2) if p.dim() > 1 else torch.nn.init.normal_(p, 1.0, 0.2)
    write(out, "hf_mixtral_tiny", mx)
    # The same weights as transformers 5 holds them in memory (each layer's
    # experts fused: mlp.experts.gate_up_proj, down_proj), as other tools write them.
    fused = os.path.join(out, "hf_mixtral_fused_tiny")
    os.makedirs(fused, exist_ok=True)
    safetensors.torch.save_file({k: v.contiguous() for k, v in mx.state_dict().items()},
                                os.path.join(fused, "model.safetensors"), metadata={"format": "pt"})
    for f in ("config.json", "expected.json"):
        shutil.copy(os.path.join(out, "hf_mixtral_tiny", f), fused)
    qmoe = transformers.Qwen3MoeConfig(
        vocab_size=64, hidden_size=32, intermediate_size=48, moe_intermediate_size=16,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        num_experts=8, num_experts_per_tok=4, norm_topk_prob=False, decoder_sparse_step=1,
        mlp_only_layers=[], max_position_embeddings=32, rms_norm_eps=1e-6,
        rope_theta=1000000.0, tie_word_embeddings=False, torch_dtype="float32")
    qm = transformers.Qwen3MoeForCausalLM(qmoe).eval()
    for p in qm.parameters():
        torch.nn.init.normal_(p, std=0.2) if p.dim() > 1 else torch.nn.init.normal_(p, 1.0, 0.2)
    write(out, "hf_qwen3_moe_tiny", qm)


if __name__ == "__main__":
    main()
