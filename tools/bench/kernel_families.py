#!/usr/bin/env python3
"""Kernel time by family from an ncu CSV (the step-time breakdown table).

  ncu --clock-control none --metrics gpu__time_duration.sum --csv --page raw \
      --print-units base --launch-skip S --launch-count N ./prog ... > k.csv
  kernel_families.py k.csv

Prints each family's share of the kernel time in the window, its total and
launch count, then the ten longest kernels by name. A kernel matching no
family is listed as "other" so nothing is dropped silently.
"""
import collections
import csv
import re
import sys

# First match wins; order from specific to general.
FAMILIES = [
    ("attention", r"Flash|BlockForward|BlockBackward|Simple(Forward|Backward)"),
    ("attention row dot", r"RowDot"),
    ("GEMM (cuBLASLt)", r"gemm|nvjet|xmma|cutlass|sm90|cublas", re.I),
    ("layernorm", r"LayerNorm"),
    ("AdamW / SGD", r"AdamW|Sgd"),
    ("column sums (bias/LN grads)", r"Column|SumPartials"),
    ("cross-entropy / vocab", r"CrossEntropy|Vocab"),
    ("GELU / bias add", r"Gelu|AddBias"),
    ("dropout", r"Dropout"),
    ("grad norm / scale", r"SumSquares|Finalize|Scale"),
    ("residual add", r"AddSame|AddMixed"),
    ("embedding", r"Embedding|WteGrad|WpeGrad"),
    ("zeroing / memset", r"ZeroMany|memset", re.I),
    ("MoE", r"Router|GatherRows|CombineRows|PrepareSort"),
]
COMPILED = [(f[0], re.compile(f[1], *(f[2:] or [0]))) for f in FAMILIES]


def family(name):
    for label, rx in COMPILED:
        if rx.search(name):
            return label
    return "other"


def read(path):
    rows = list(csv.reader(open(path, errors="replace")))
    start = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
    head = rows[start]
    name_col = head.index("Kernel Name")
    time_col = next(i for i, h in enumerate(head) if h.startswith("gpu__time_duration"))
    for r in rows[start + 1:]:
        if len(r) <= max(name_col, time_col):
            continue
        try:
            ns = float(r[time_col].replace(",", ""))
        except ValueError:
            continue  # the units row
        yield r[name_col], ns


def main():
    by_family = collections.defaultdict(lambda: [0.0, 0])
    by_name = collections.defaultdict(float)
    for name, ns in read(sys.argv[1]):
        f = by_family[family(name)]
        f[0] += ns
        f[1] += 1
        by_name[name.replace("(anonymous namespace)::", "").split("(")[0][:80]] += ns
    total = sum(v[0] for v in by_family.values())
    if total == 0:
        sys.exit("kernel_families: no kernel times in " + sys.argv[1])
    print(f"| family | share | ms | launches |\n|---|---|---|---|")
    for label, (ns, n) in sorted(by_family.items(), key=lambda kv: -kv[1][0]):
        print(f"| {label} | {100 * ns / total:.1f}% | {ns / 1e6:.2f} | {n} |")
    print(f"| kernel time in the window | | {total / 1e6:.2f} | "
          f"{sum(v[1] for v in by_family.values())} |")
    print("\nlongest kernels:")
    for name, ns in sorted(by_name.items(), key=lambda kv: -kv[1])[:10]:
        print(f"  {ns / 1e6:8.2f} ms  {name}")


if __name__ == "__main__":
    main()
