#!/usr/bin/env python3
"""Copies core/kernels/cuda sources into OUT_DIR rewritten for CPU emulation.

Usage: transform.py SRC_DIR OUT_DIR

g++ cannot parse kernel launches, inline PTX or __shared__ semantics, so:
  Kernel<<<grid, block[, smem[, stream]]>>>(args)
      -> emu::Launch([&](auto&&... a) { Kernel(a...); }, grid, block, smem, stream, args)
     (by reference: the kernel may be a local function pointer)
  static __shared__ arrays -> function-local statics (blocks run one at a time)
  inline PTX (asm volatile) -> calls into prelude.h, operand by operand:
    mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32   -> emu::mma
    wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16 (A in registers,
      B by descriptor)                                     -> emu::wgmma
    wgmma.commit_group / wait_group                       -> emu::wgmma_commit / _wait
    wgmma.fence                                           -> a warp barrier
    fence.proxy.async                                     -> emu::fence_proxy_async
    ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16 -> emu::ldmatrix
    cp.async.{ca,cg}.shared.global [dst], [src], size[, src_size] -> emu::cp_async
    cp.async.commit_group / wait_group N / wait_all       -> emu::cp_async_*
  Any other asm block stops the transform (it would otherwise not compile, or
  worse, be skipped).
  cudaFuncSetAttribute / cudaGetLastError / CUB radix sort / cudaGetDevice /
  cudaDeviceGetAttribute (an sm_90 device 0) / cudaMemsetAsync -> emulator stubs
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
    return 'emu::Launch([&](auto&&... emu_a) { ' + m.group(1) + '(emu_a...); }, ' + cfg + ', '


def split_top(s, sep):
    """Splits s at `sep` outside parentheses, brackets and string literals."""
    parts, depth, cur, quote = [], 0, '', False
    for i, ch in enumerate(s):
        if quote:
            cur += ch
            if ch == '"' and s[i - 1] != '\\':
                quote = False
            continue
        if ch == '"':
            quote = True
        elif ch in '([{':
            depth += 1
        elif ch in ')]}':
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append(cur)
            cur = ''
            continue
        cur += ch
    parts.append(cur)
    return parts


def operands(section):
    """'"=r"(a[0]), "r"(x)' -> [('=r', 'a[0]'), ('r', 'x')]."""
    out = []
    for op in split_top(section, ','):
        op = op.strip()
        if not op:
            continue
        m = re.fullmatch(r'"([^"]*)"\s*\((.*)\)', op, flags=re.S)
        assert m, 'unparsed asm operand: ' + op
        out.append((m.group(1), ' '.join(m.group(2).split())))
    return out


def shared_pointer(expr, what):
    # The kernels pass shared addresses as SharedAddress(pointer); the
    # emulator needs the pointer itself.
    m = re.fullmatch(r'SharedAddress\((.*)\)', expr)
    assert m, what + ': shared address operand is not SharedAddress(ptr): ' + expr
    return m.group(1)


def rewrite_asm(body, where):
    """body: the text between 'asm volatile(' and the closing ')'."""
    sections = split_top(body, ':')
    template = ''.join(re.findall(r'"((?:[^"\\]|\\.)*)"', sections[0]))
    template = template.replace('\\n', ' ').replace('\\t', ' ').strip().rstrip(';').strip()
    ops = []
    for sec in sections[1:3]:
        ops += operands(sec)
    arg = lambda ref: ops[int(ref.lstrip('%'))][1]
    regs = lambda group: [arg(r.strip()) for r in group.split(',')]
    what = where + ': "' + template + '"'

    # An empty template only orders registers for the compiler (WgmmaPin).
    if template == '':
        return ';'

    m = re.fullmatch(r'mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.bf16\.bf16\.f32\s+'
                     r'\{([^}]*)\},\s*\{([^}]*)\},\s*\{([^}]*)\},\s*\{([^}]*)\}', template)
    if m:
        d, a, b, c = (regs(m.group(i)) for i in range(1, 5))
        assert len(d) == 4 and len(a) == 4 and len(b) == 2 and len(c) == 4, what
        return ('{ float emu_d[4] = {%s}; const uint32_t emu_a[4] = {%s}, emu_b[2] = {%s}; '
                '::emu::mma(emu_d, emu_a, emu_b); %s }'
                % (', '.join(c), ', '.join(a), ', '.join(b),
                   ' '.join('%s = emu_d[%d];' % (x, i) for i, x in enumerate(d))))

    m = re.fullmatch(r'ldmatrix\.sync\.aligned\.m8n8\.x([124])(\.trans)?\.shared(?:::cta)?\.b16\s+'
                     r'\{([^}]*)\},\s*\[(%\d+)\]', template)
    if m:
        n, trans, dst = int(m.group(1)), bool(m.group(2)), regs(m.group(3))
        assert len(dst) == n, what
        ptr = shared_pointer(arg(m.group(4)), what)
        return '::emu::ldmatrix<%d, %s>(%s, {%s});' % (
            n, 'true' if trans else 'false', ptr, ', '.join('&' + x for x in dst))

    m = re.fullmatch(r'cp\.async\.(?:ca|cg)\.shared(?:::cta)?\.global(?:\.L2::\w+)?\s+'
                     r'\[(%\d+)\],\s*\[(%\d+)\],\s*(\d+)(?:,\s*(%\d+))?', template)
    if m:
        dst = shared_pointer(arg(m.group(1)), what)
        size = m.group(3)
        src_size = arg(m.group(4)) if m.group(4) else size
        return '::emu::cp_async(%s, %s, %s, %s);' % (dst, arg(m.group(2)), size, src_size)

    # wgmma with A in registers (wgmma.cuh): the predicate scale-d comes from
    # the setp on operand %S; imm-scale-a/b 1 are all we use; imm-trans-b is
    # an immediate operand (0: B K-major, 1: B N-major).
    m = re.fullmatch(r'\{\s*\.reg \.pred p;\s*setp\.ne\.b32 p, (%\d+), 0;\s*'
                     r'wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.f32\.bf16\.bf16\s+'
                     r'\{([^}]*)\},\s*\{([^}]*)\},\s*(%\d+),\s*p,\s*1,\s*1,\s*(%\d+|[01]);\s*\}',
                     template)
    if m:
        n, d, a = int(m.group(2)), regs(m.group(3)), regs(m.group(4))
        assert len(d) == n // 2 and len(a) == 4, what
        tnsp = m.group(6)
        tnsp = arg(tnsp) if tnsp.startswith('%') else tnsp
        return ('{ float* const emu_d[%d] = {%s}; const uint32_t emu_a[4] = {%s}; '
                '::emu::wgmma<%d>(emu_d, emu_a, %s, %s, %s); }'
                % (n // 2, ', '.join('&' + x for x in d), ', '.join(a), n, arg(m.group(5)),
                   arg(m.group(1)), tnsp))
    # The emulator runs wgmma products at the wait that retires them
    # (prelude.h) and keeps one memory; wgmma.fence has nothing to order, and
    # fence.proxy.async releases the chunks cp.async wrote to wgmma.
    if template == 'wgmma.fence.sync.aligned':
        return '::emu::warp_sync();'
    if template == 'fence.proxy.async.shared::cta':
        return '::emu::fence_proxy_async();'
    if template == 'wgmma.commit_group.sync.aligned':
        return '::emu::wgmma_commit();'
    m = re.fullmatch(r'wgmma\.wait_group\.sync\.aligned\s+(%\d+|\d+)', template)
    if m:
        n = m.group(1)
        return '::emu::wgmma_wait(%s);' % (arg(n) if n.startswith('%') else n)

    if template == 'cp.async.commit_group':
        return '::emu::cp_async_commit();'
    m = re.fullmatch(r'cp\.async\.wait_group\s+(%\d+|\d+)', template)
    if m:
        n = m.group(1)
        return '::emu::cp_async_wait(%s);' % (arg(n) if n.startswith('%') else n)
    if template == 'cp.async.wait_all':
        return '::emu::cp_async_wait(0);'
    raise AssertionError('no emulation for inline PTX ' + what)


def rewrite_all_asm(name, s):
    out, pos = '', 0
    for m in re.finditer(r'asm\s+volatile\s*\(', s):
        if m.start() < pos:
            continue
        depth, i = 1, m.end()
        while depth:
            if s[i] == '"':  # skip string literals (may hold parentheses)
                i += 1
                while s[i] != '"':
                    i += 2 if s[i] == '\\' else 1
            elif s[i] == '(':
                depth += 1
            elif s[i] == ')':
                depth -= 1
            i += 1
        end = i + 1 if s[i] == ';' else i
        out += s[pos:m.start()] + rewrite_asm(s[m.end():i - 1], name)
        pos = end
    return out + s[pos:]


def transform(name, s):
    s = re.sub(r'(\w+(?:<[^<>;]*?>)?)<<<(.*?)>>>\(', launch, s, flags=re.S)
    s = s.replace('cudaFuncSetAttribute(', 'EmuFuncSetAttribute(')
    s = s.replace('cudaGetDevice(', 'EmuGetDevice(')
    s = s.replace('cudaMemsetAsync(', 'EmuMemsetAsync(')
    s = s.replace('cudaDeviceGetAttribute(', 'EmuDeviceGetAttribute(')
    s = s.replace('const cudaError_t err = cudaGetLastError();',
                  'const cudaError_t err = cudaSuccess;')
    s = s.replace('#include <cub/device/device_radix_sort.cuh>', '')
    s = s.replace('cub::DeviceRadixSort::SortPairs', 'emucub::SortPairs')
    s = re.sub(r'(?<!extern )__shared__ ', 'static ', s)
    # Host g++ has no __cvta_generic_to_shared; the rewritten PTX takes the
    # pointers themselves, so the 32-bit shared address is never used.
    s = s.replace('__cvta_generic_to_shared(p)', 'reinterpret_cast<uintptr_t>(p)')
    return rewrite_all_asm(name, s)


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
