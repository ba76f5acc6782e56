#!/usr/bin/env python3
"""Writes the GPT-2-scheme tokenizer fixtures gpt2_tokenizer_test reads:
a byte-level BPE of 1000 tokens that Hugging Face's tokenizers library
trains on tinyshakespeare with GPT-2's pre-tokenizer, saved as
tokenizer.json and as GPT-2's vocab.json + merges.txt, plus expected.json:
texts (tricky ones, and the first 20000 characters of WikiText-2's test
split, with its Unicode) and the ids tokenizers gives them.

Run by hand, not by the build (tokenizers is not a weft dependency):
    python3 -m pip install tokenizers
    python3 data/testdata/make_gpt2_tokenizer_fixture.py ../shared/data data/testdata/gpt2_tok
"""
import json
import os
import sys

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

# Llama 3's split pattern, as its tokenizer.json holds it.
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
          r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

TEXTS = [
    "Hello, world! It's a test: don't, we'll, I'd, they're, you've, I'm.",
    "  leading spaces, double  spaces,   triple,\ttabs\t\tand trailing   ",
    "line one\nline two\n\n\nthree blank\r\nwindows\n",
    "numbers 12345 and 3.14159, 2nd 1st; mixed a1b2c3",
    "Unicode: café naïve Ærøskøbing 東京 Москва ١٢٣ ½ — “quotes” 🙂 end",
    "'s alone, 'S capital, ''double, 'll'd've",
    "<|endoftext|> splits out, as a special token<|endoftext|>",
    "<|begin_of_text|>Llama's<|eot_id|> specials<|end_of_text|>",
    "DON'T SHOUT, 'Tis 12345678 digits\r\n\r\nand  (parens) \"quotes\"!\n  \n",
    "",
    " ",
    "\n",
]


FORTUNES = "/usr/share/games/fortunes"  # Debian's fortunes-min, which CI installs


def fnv(ids, h=0xcbf29ce484222325):
    """FNV-1a over the ids as little-endian int32 (the test computes the same)."""
    for i in ids:
        for b in int(i).to_bytes(4, "little", signed=True):
            h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def fortunes(tok):
    """Every UTF-8 text file of the fortunes corpus, each encoded alone: the
    file names, and the count and hash of all their ids in order."""
    names, ids = [], []
    for name in sorted(os.listdir(FORTUNES)):
        path = os.path.join(FORTUNES, name)
        if "." in name or not os.path.isfile(path):
            continue
        try:
            text = open(path, encoding="utf-8").read()
        except UnicodeDecodeError:
            continue
        names.append(name)
        ids += tok.encode(text, add_special_tokens=False).ids
    return {"dir": FORTUNES, "files": names, "count": len(ids), "fnv": f"{fnv(ids):016x}"}


def write(out, tok, eot, data):
    wiki = open(os.path.join(data, "wikitext-2", "test.txt"), encoding="utf-8").read()[:20000]
    texts = TEXTS + [wiki]
    expected = [{"text": t, "ids": tok.encode(t, add_special_tokens=False).ids} for t in texts]
    with open(os.path.join(out, "expected.json"), "w", encoding="utf-8") as f:
        json.dump({"vocab_size": tok.get_vocab_size(), "eot": tok.token_to_id(eot),
                   "cases": expected, "fortunes": fortunes(tok)}, f, ensure_ascii=False)
    print(out, tok.get_vocab_size(), "tokens;", sum(len(e["ids"]) for e in expected), "ids")


def main():
    data, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    shakespeare = open(os.path.join(data, "tinyshakespeare", "input.txt"), encoding="utf-8").read()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1000, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([shakespeare], trainer=trainer)
    tok.save(os.path.join(out, "tokenizer.json"))
    tok.model.save(out)  # vocab.json, merges.txt
    write(out, tok, "<|endoftext|>", data)
    # Llama 3's scheme: its split, ByteLevel without the regex, ignore_merges,
    # and its special tokens after the vocabulary.
    llama = os.path.join(out, "llama3")
    os.makedirs(llama, exist_ok=True)
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([shakespeare], trainer=trainer)
    tok.add_special_tokens(["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                            "<|eot_id|>"])
    tok.save(os.path.join(llama, "tokenizer.json"))
    write(llama, tok, "<|end_of_text|>", data)


if __name__ == "__main__":
    main()
