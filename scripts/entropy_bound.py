#!/usr/bin/python3
"""Order-0 entropy bound of checkpoint files (safetensors or PyTorch zip .pt).

What is computed, per tensor (empirical order-0 entropy H = -sum p log2 p of the
symbol histogram of that tensor alone, times the symbol count; no model cost):

  default ("whole-word") bound
    bf16, fp16   H of the whole 16-bit element values (65536-symbol alphabet).
    fp32         H(sign bit) + H(8-bit exponent field) + H of each of the 3
                 mantissa byte planes: bits 16..22 (7 bits), bits 8..15, bits 0..7.
                 (A whole 32-bit word histogram is meaningless on tensors much
                 smaller than 2^32 elements, so fp32 is always measured by fields.)
    other        byte-wise: H of all the tensor's bytes pooled (256 symbols);
                 this covers int32, int64, bool, u8, fp64 ...
  --fields bound
    bf16         H(sign) + H(8-bit exponent) + H(7-bit mantissa)
    fp16         H(sign) + H(5-bit exponent) + H(10-bit mantissa)
    fp32         same as the default (sign + exponent + 3 mantissa byte planes)
    other        same as the default (byte-wise)

The whole-word bound is the plug-in (empirical) entropy: no order-0 coder,
which must describe its model, reaches it, and the distance grows as tensors
shrink. On the bf16/fp16 corpus (scripts/bound_gap.py, 2026-12-01) brevis's
rans_static payloads are within 0.12% of the plug-in entropy of the symbols
they code, yet fp16 tensors under 16K elements cost 16% over this bound: a
tensor of n mostly distinct words has a bound near n log2 n bits. Only models
beyond order 0 (per-channel statistics, say) can close that gap.

Everything that is not tensor data (8-byte length + JSON header of safetensors;
zip headers, pickle, padding of a .pt; bytes of a tensor beyond a whole number of
elements) is counted raw, at 8 bits per byte. Tensors sharing storage in a .pt
are counted once.

  /usr/bin/python3 scripts/entropy_bound.py [--fields] [--verbose] [--tsv] FILE...

Prints per file: original bytes, bound bytes, ratio = original / bound; and the
total over all files. --tsv prints machine-readable rows:
  path  original_bytes  bound_words_bytes  bound_fields_bytes
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

ST_KIND = {"BF16": "bf16", "F16": "fp16", "F32": "fp32"}  # everything else: bytes
ST_ITEMSIZE = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "I64": 8, "U64": 8, "I32": 4,
               "U32": 4, "I16": 2, "U16": 2, "I8": 1, "U8": 1, "BOOL": 1,
               "F8_E4M3": 1, "F8_E5M2": 1}


class BadFile(Exception):
    pass


def entropy_bits(values, nsym):
    """Empirical order-0 entropy of an integer array, in bits (total, not per symbol)."""
    n = values.size
    if n == 0:
        return 0.0
    c = np.bincount(values.ravel(), minlength=nsym)
    c = c[c > 0].astype(np.float64)
    return float(n * math.log2(n) - np.sum(c * np.log2(c)))


def tensor_bounds(kind, data):
    """data: uint8 array of the tensor's bytes. Returns (words_bits, fields_bits)."""
    if kind in ("bf16", "fp16"):
        n = data.size // 2
        w = data[: 2 * n].view("<u2")
        words = entropy_bits(w, 65536)
        if kind == "bf16":
            fields = (entropy_bits(w >> 15, 2) + entropy_bits((w >> 7) & 0xFF, 256)
                      + entropy_bits(w & 0x7F, 128))
        else:
            fields = (entropy_bits(w >> 15, 2) + entropy_bits((w >> 10) & 0x1F, 32)
                      + entropy_bits(w & 0x3FF, 1024))
        tail = 8.0 * (data.size - 2 * n)
        return words + tail, fields + tail
    if kind == "fp32":
        n = data.size // 4
        w = data[: 4 * n].view("<u4")
        bits = (entropy_bits(w >> 31, 2) + entropy_bits((w >> 23) & 0xFF, 256)
                + entropy_bits((w >> 16) & 0x7F, 128) + entropy_bits((w >> 8) & 0xFF, 256)
                + entropy_bits(w & 0xFF, 256))
        bits += 8.0 * (data.size - 4 * n)
        return bits, bits
    bits = entropy_bits(data, 256)
    return bits, bits


def safetensors_tensors(path, buf):
    """Returns [(name, dtype, kind, itemsize, uint8 array)]. Raises BadFile if not safetensors."""
    if len(buf) < 8:
        raise BadFile("too short for safetensors")
    (hlen,) = struct.unpack("<Q", buf[:8].tobytes())
    if hlen > len(buf) - 8 or hlen > 100_000_000:
        raise BadFile("bad safetensors header length")
    try:
        header = json.loads(buf[8: 8 + hlen].tobytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadFile(f"safetensors header is not JSON: {e}")
    if not isinstance(header, dict):
        raise BadFile("safetensors header is not an object")
    base = 8 + hlen
    out = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            b, e = (int(x) for x in info["data_offsets"])
            dt = info["dtype"]
        except (KeyError, TypeError, ValueError):
            raise BadFile(f"tensor {name}: bad header entry")
        if not 0 <= b <= e <= len(buf) - base:
            raise BadFile(f"tensor {name}: data_offsets out of range")
        out.append((name, dt, ST_KIND.get(dt, "bytes"), ST_ITEMSIZE.get(dt, 1),
                    buf[base + b: base + e]))
    return out


def torch_tensors(path):
    """Returns [(name, dtype, kind, itemsize, uint8 array)], one per distinct storage of a .pt."""
    import torch
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many types on malformed input
        raise BadFile(f"torch.load failed: {e}")
    kinds = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
    out, seen = [], set()

    def walk(prefix, o):
        if isinstance(o, torch.Tensor):
            # Whole storage (not just the view), as its own dtype, then as bytes.
            # Works on torch 1.13 (Debian 12) and 2.x (TypedStorage still exists).
            st = o.storage()
            key = (st.data_ptr(), st.size() * o.element_size())
            if key in seen:
                return
            seen.add(key)
            full = torch.empty(0, dtype=o.dtype).set_(st)
            raw = full.view(torch.uint8) if full.numel() else torch.empty(0, dtype=torch.uint8)
            out.append((prefix, str(o.dtype).replace("torch.", ""),
                        kinds.get(o.dtype, "bytes"), o.element_size(), raw.numpy()))
        elif isinstance(o, dict):
            for k, v in o.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif isinstance(o, (list, tuple)):
            for i, v in enumerate(o):
                walk(f"{prefix}.{i}" if prefix else str(i), v)

    walk("", obj)
    return out


def analyze(path, verbose=False, fields=False):
    """Returns (original_bytes, words_bytes, fields_bytes)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic == b"PK\x03\x04":
        tensors = torch_tensors(path)
    else:
        buf = np.fromfile(path, dtype=np.uint8)
        try:
            tensors = safetensors_tensors(path, buf)
        except BadFile as e:
            print(f"entropy_bound: {path}: {e}; measuring the whole file byte-wise",
                  file=sys.stderr)
            tensors = [("<whole file>", "bytes", "bytes", 1, buf)]
    tensor_bytes = sum(t[4].size for t in tensors)
    raw_bytes = size - tensor_bytes
    if raw_bytes < 0:
        raise BadFile(f"tensors overlap ({tensor_bytes} tensor bytes in a {size}-byte file)")
    words_bits = fields_bits = 8.0 * raw_bytes
    for name, dt, kind, itemsize, data in tensors:
        wb, fb = tensor_bounds(kind, data)
        words_bits += wb
        fields_bits += fb
        if verbose:
            b = fb if fields else wb
            bpe = b / max(1, data.size // itemsize)
            print(f"  {name}\t{dt}\t{data.size}\t{b / 8:.0f}\t"
                  f"{data.size * 8 / b if b else float('inf'):.3f}\t{bpe:.3f} bits/elem")
    if verbose:
        print(f"  <non-tensor bytes, raw>\t-\t{raw_bytes}\t{raw_bytes}\t1.000")
    return size, words_bits / 8, fields_bits / 8


def main():
    ap = argparse.ArgumentParser(description="Order-0 entropy bound of checkpoint files.",
                                 epilog="See the module docstring for exactly what is computed.")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--fields", action="store_true",
                    help="sum of sign/exponent/mantissa field entropies instead of whole words")
    ap.add_argument("--verbose", "-v", action="store_true",
                    help="per-tensor rows: name, dtype, bytes, bound bytes, ratio, bits/element")
    ap.add_argument("--tsv", action="store_true",
                    help="machine-readable: path, original, words bound, fields bound (bytes)")
    args = ap.parse_args()
    tot = [0, 0.0, 0.0]
    failed = 0
    mode = "fields" if args.fields else "whole-word"
    for path in args.files:
        if args.verbose:
            print(f"{path}:\n  tensor\tdtype\tbytes\tbound_bytes\tratio\tbits/elem")
        try:
            size, wb, fb = analyze(path, args.verbose and not args.tsv, args.fields)
        except (BadFile, OSError) as e:
            print(f"entropy_bound: {path}: error: {e}", file=sys.stderr)
            failed += 1
            continue
        tot[0] += size
        tot[1] += wb
        tot[2] += fb
        if args.tsv:
            print(f"{path}\t{size}\t{wb:.0f}\t{fb:.0f}")
        else:
            b = fb if args.fields else wb
            print(f"{path}: original {size} B, {mode} bound {b:.0f} B, ratio {size / b:.4f}")
    if not args.tsv and len(args.files) > 1 and tot[0]:
        b = tot[2] if args.fields else tot[1]
        print(f"total ({len(args.files) - failed} files): original {tot[0]} B, {mode} bound "
              f"{b:.0f} B, ratio {tot[0] / b:.4f}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
