#!/usr/bin/env python3
"""Checks a weft Hugging Face export with transformers itself: the
directory loads with from_pretrained with no missing, unexpected or
mismatched tensors, every loaded tensor equals the file's, and greedy
decoding from a prompt gives the text //models/{gpt,llama}:sample printed
for the same prompt (weft's char tokenizer file maps the ids).

Run by hand, not by the build (transformers is not a weft dependency):
    python3 -m pip install torch transformers safetensors
    bazel run //tools:ckpt -- export CKPT --format=hf --out=/tmp/hf
    bazel run //tools:ckpt -- export CKPT --format=tokenizer --out=/tmp/tok.txt
    bazel run //models/llama:sample -- --checkpoint=CKPT --prompt="the quick" \\
        --tokens=40 --temperature=0 > /tmp/weft.txt
    python3 tools/ckpt/hf_export_check.py /tmp/hf /tmp/tok.txt "the quick" 40 /tmp/weft.txt
"""
import sys

import torch
import transformers
from safetensors.torch import load_file


def char_tokenizer(path):
    lines = open(path, encoding="utf-8").read().split("\n")
    assert lines[0] == "weft-tokenizer char v1", lines[0]
    n = int(lines[1])
    units = [int(x) for x in lines[2:2 + n]]
    return {chr(u): i for i, u in enumerate(units) if u < 0x110000}, units


def main():
    hf_dir, tok_path, prompt, tokens, weft_out = sys.argv[1:6]
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        hf_dir, output_loading_info=True, torch_dtype=torch.float32)
    model.eval()
    bad = {k: v for k, v in info.items() if v}
    assert not bad, f"loading info: {bad}"
    files = load_file(f"{hf_dir}/model.safetensors")
    state = model.state_dict()
    converted = 0  # transformers 5 fuses MoE experts on load: checked by the text below
    for name, t in files.items():
        if name not in state:
            converted += 1
            continue
        assert torch.equal(state[name], t), name
    ids_of, units = char_tokenizer(tok_path)
    ids = torch.tensor([[ids_of[c] for c in prompt]])
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=int(tokens), do_sample=False, top_k=None,
                             top_p=None, temperature=None)
    text = "".join(chr(units[i]) for i in out[0].tolist())
    weft = open(weft_out, encoding="utf-8").read().strip("\n")
    print("transformers:", repr(text))
    print("weft:        ", repr(weft))
    assert text == weft, "greedy texts differ"
    print(f"PASS: {type(model).__name__} from {hf_dir}: {len(files)} tensors load "
          f"({converted} fused by transformers on load); greedy text equals weft's")


if __name__ == "__main__":
    main()
