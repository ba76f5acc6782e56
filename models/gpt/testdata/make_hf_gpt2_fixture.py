#!/usr/bin/env python3
"""Writes the tiny Hugging Face GPT2LMHeadModel that hf_gpt2_test reads: a
directory as transformers' save_pretrained writes it (config.json,
model.safetensors), with a vocabulary of 65 (weft pads it to 128) and
expected.json: a token sequence and the per-token losses transformers
computes on it (f32, CPU).

Run by hand, not by the build (transformers is not a weft dependency):
    python3 -m pip install torch transformers safetensors
    python3 models/gpt/testdata/make_hf_gpt2_fixture.py models/gpt/testdata
"""
import json
import os
import sys

import torch
import transformers

TOKENS = [3, 17, 5, 60, 22, 8, 41, 0, 13, 7, 55, 31, 2, 19, 44, 64]


def main():
    out = os.path.join(sys.argv[1], "hf_gpt2_tiny")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=65, n_positions=32, n_embd=32, n_layer=2,
                                     n_head=4, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                     bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config).eval()
    for p in model.parameters():  # weights large enough that every path shows
        torch.nn.init.normal_(p, std=0.2) if p.dim() > 1 else torch.nn.init.normal_(p, 0.5, 0.2)
    model.save_pretrained(out, safe_serialization=True)
    ids = torch.tensor([TOKENS])
    with torch.no_grad():
        logits = model(ids).logits[0, :-1].float()
    losses = torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="none")
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({"tokens": TOKENS, "losses": [float(x) for x in losses]}, f)
    print(out, "mean loss", float(losses.mean()))


if __name__ == "__main__":
    main()
