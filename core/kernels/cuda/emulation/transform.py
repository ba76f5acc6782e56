#!/usr/bin/env python3
"""Copies core/kernels/cuda sources into OUT_DIR rewritten for CPU emulation.

Usage: transform.py SRC_DIR OUT_DIR

g++ cannot parse kernel launches, inline PTX or __shared__ semantics, so:
  Kernel<<<grid, block[, smem[, stream]]>>>(args)
      -> emu::Launch([](auto&&... a) { Kernel(a...); }, grid, block, smem, stream, args)
  static __shared__ arrays -> function-local statics (blocks run one at a time)
  the mma.sync asm in attention_mma.cuh -> emu::mma (layout from the PTX ISA)
  cudaFuncSetAttribute / cudaGetLastError / CUB radix sort -> emulator stubs
Everything else (indexing, masking, fragment loads, reductions) is the real code.
"""
import os
import re
import sys


def launch(m):
    cfg = m.group(2)
    commas = cfg.count(',')
    if commas == 1:
        cfg += ', 0, nullptr'
    elif commas == 2:
        cfg += ', nullptr'
    return 'emu::Launch([](auto&&... emu_a) { ' + m.group(1) + '(emu_a...); }, ' + cfg + ', '


def transform(name, s):
    s = re.sub(r'(\w+(?:<[^<>;]*?>)?)<<<(.*?)>>>\(', launch, s, flags=re.S)
    s = s.replace('cudaFuncSetAttribute(', 'EmuFuncSetAttribute(')
    s = s.replace('const cudaError_t err = cudaGetLastError();',
                  'const cudaError_t err = cudaSuccess;')
    s = s.replace('#include <cub/device/device_radix_sort.cuh>', '')
    s = s.replace('cub::DeviceRadixSort::SortPairs', 'emucub::SortPairs')
    s = re.sub(r'(?<!extern )__shared__ ', 'static ', s)
    if name == 'attention_mma.cuh':
        # Only the mma.sync asm has an emulation; ldmatrix and cp.async stay
        # PTX, so the flash kernels that use them are not emulated (run.sh).
        s, n = re.subn(r'  asm volatile\(\s*"mma\.sync.*?\);\n', '  ::emu::mma(d, a, b);\n', s,
                       flags=re.S)
        assert n == 1, 'mma asm not found'
    return s


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(src):
        if f.endswith(('.cu', '.cuh', '.h')):
            with open(os.path.join(src, f)) as fin:
                text = transform(f, fin.read())
            with open(os.path.join(out, f), 'w') as fout:
                fout.write(text)


if __name__ == '__main__':
    main()
