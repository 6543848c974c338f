#!/usr/bin/python3
"""Convert TF.js models (model.json + .bin weight shards) into checkpoint files.

For every model.json given, writes into --out:
  <model>.fp32.safetensors   float tensors as float32
  <model>.bf16.safetensors   float tensors rounded to bfloat16 (torch, nearest-even)
  <model>.fp16.safetensors   float tensors rounded to float16
  <model>.bf16.pt            torch.save() of a dict of the bf16 tensors
Non-float tensors (int32, bool, ...) keep their dtype in every file.

Quantized weights are dequantized to float32 exactly as TF.js does
(tfjs-core io_utils.decodeWeights): uint8/uint16 -> q * scale + min, computed in
double precision and stored into a Float32Array (one rounding to float32);
float16 -> exact widening to float32. The fp32 copies therefore carry the
structure of the original quantization (<= 256 / 65536 distinct values, or a
10-bit mantissa with 13 zero low bits).

Run with Debian's python (numpy + torch): /usr/bin/python3 scripts/tfjs_convert.py
Idempotent: an output that already exists is not rewritten; outputs are written
to a temporary name and renamed, so an interrupted run leaves no partial file.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

# TF.js dtype -> (numpy dtype of the stored bytes, safetensors dtype name)
TFJS_DTYPES = {
    "float32": (np.float32, "F32"),
    "int32": (np.int32, "I32"),
    "bool": (np.bool_, "BOOL"),
    "uint8": (np.uint8, "U8"),
    "int16": (np.int16, "I16"),
    "uint16": (np.uint16, "U16"),
    "float16": (np.float16, "F16"),
    "int8": (np.int8, "I8"),
    "complex64": None,  # not supported (none in the corpus)
    "string": None,
}
QUANT_DTYPES = {"uint8": np.uint8, "uint16": np.uint16, "float16": np.float16}

VARIANTS = ("fp32.safetensors", "bf16.safetensors", "fp16.safetensors", "bf16.pt")


class ConvertError(Exception):
    pass


def load_tfjs(manifest_path):
    """Return an ordered list of (name, np.ndarray) decoded like TF.js does."""
    with open(manifest_path, "rb") as f:
        try:
            model = json.load(f)
        except json.JSONDecodeError as e:
            raise ConvertError(f"{manifest_path}: not valid JSON: {e}")
    if not isinstance(model, dict) or "weightsManifest" not in model:
        raise ConvertError(f"{manifest_path}: no weightsManifest (not a TF.js model.json)")
    base = os.path.dirname(manifest_path)
    tensors = []
    seen = set()
    for gi, group in enumerate(model["weightsManifest"]):
        buf = bytearray()
        for p in group["paths"]:
            shard = os.path.join(base, p)
            if not os.path.exists(shard):
                raise ConvertError(f"{manifest_path}: missing weight shard {shard}")
            with open(shard, "rb") as f:
                buf += f.read()
        buf = bytes(buf)
        off = 0
        for w in group["weights"]:
            name, shape, dtype = w["name"], [int(d) for d in w["shape"]], w["dtype"]
            if TFJS_DTYPES.get(dtype) is None:
                raise ConvertError(f"{manifest_path}: tensor {name}: unsupported dtype {dtype}")
            n = int(np.prod(shape, dtype=np.int64)) if shape else 1
            q = w.get("quantization")
            if q:
                qdt = QUANT_DTYPES.get(q.get("dtype"))
                if qdt is None:
                    raise ConvertError(f"{name}: unsupported quantization dtype {q.get('dtype')}")
                nbytes = n * np.dtype(qdt).itemsize
                raw = np.frombuffer(buf, dtype=qdt, count=n, offset=off) if n else np.zeros(0, qdt)
                if q["dtype"] == "float16":
                    if dtype != "float32":
                        raise ConvertError(f"{name}: float16 quantization of {dtype}")
                    arr = raw.astype(np.float32)  # exact widening
                else:
                    if "scale" not in q or "min" not in q:
                        raise ConvertError(f"{name}: {q['dtype']} quantization without scale/min")
                    v = raw.astype(np.float64) * float(q["scale"]) + float(q["min"])
                    if dtype == "float32":
                        arr = v.astype(np.float32)
                    elif dtype == "int32":
                        arr = np.round(v).astype(np.int32)  # TF.js uses Math.round
                    else:
                        raise ConvertError(f"{name}: quantized {dtype} not supported")
            else:
                npdt = TFJS_DTYPES[dtype][0]
                nbytes = n * np.dtype(npdt).itemsize
                arr = (np.frombuffer(buf, dtype=npdt, count=n, offset=off).copy()
                       if n else np.zeros(0, npdt))
            if off + nbytes > len(buf):
                raise ConvertError(f"{manifest_path}: tensor {name} runs past the end of its "
                                   f"shards ({off + nbytes} > {len(buf)} bytes)")
            off += nbytes
            arr = arr.reshape(shape)
            # Names are unique in practice; disambiguate just in case.
            uname, k = name, 1
            while uname in seen:
                uname, k = f"{name}__{k}", k + 1
            seen.add(uname)
            tensors.append((uname, arr))
        if off != len(buf):
            print(f"  warning: {manifest_path} group {gi}: {len(buf) - off} trailing bytes ignored",
                  file=sys.stderr)
    return tensors


def to_torch(arr, float_dtype):
    import torch
    t = torch.from_numpy(np.ascontiguousarray(arr))
    if arr.dtype == np.float32:
        t = t.to(float_dtype)
    return t.contiguous().clone()


def st_dtype_name(t):
    import torch
    return {
        torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16",
        torch.int32: "I32", torch.int64: "I64", torch.int16: "I16", torch.int8: "I8",
        torch.uint8: "U8", torch.bool: "BOOL", torch.float64: "F64",
    }[t.dtype]


def tensor_bytes(t):
    import torch
    t = t.contiguous()
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def write_safetensors(path, items):
    """items: list of (name, torch.Tensor). Header keys keep manifest order."""
    header = {"__metadata__": {"format": "pt"}}
    blobs = []
    off = 0
    for name, t in items:
        b = tensor_bytes(t)
        header[name] = {"dtype": st_dtype_name(t), "shape": list(t.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((-len(h)) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)


def convert(manifest_path, out_dir, model_name=None):
    import torch
    name = model_name or os.path.splitext(os.path.basename(manifest_path))[0]
    if name == "model":  # directory layout <name>/model.json
        name = os.path.basename(os.path.dirname(os.path.abspath(manifest_path)))
    outs = {v: os.path.join(out_dir, f"{name}.{v}") for v in VARIANTS}
    todo = [v for v in VARIANTS if not os.path.exists(outs[v])]
    if not todo:
        return name, "skip", 0
    tensors = load_tfjs(manifest_path)
    written = 0
    for v in todo:
        fdt = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[v.split(".")[0]]
        items = [(n, to_torch(a, fdt)) for n, a in tensors]
        tmp = outs[v] + ".tmp"
        if v.endswith(".pt"):
            torch.save(dict(items), tmp)
        else:
            write_safetensors(tmp, items)
        os.replace(tmp, outs[v])
        written += os.path.getsize(outs[v])
    return name, "ok", written


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("manifests", nargs="+", help="TF.js model.json files")
    ap.add_argument("--out", required=True, help="output directory")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    failed = 0
    for i, m in enumerate(args.manifests, 1):
        t0 = time.time()
        try:
            name, status, nbytes = convert(m, args.out)
        except (ConvertError, OSError, KeyError, ValueError) as e:
            print(f"[{i}/{len(args.manifests)}] {m}: ERROR: {e}", file=sys.stderr)
            failed += 1
            continue
        if status == "skip":
            print(f"[{i}/{len(args.manifests)}] {name}: already converted", flush=True)
        else:
            print(f"[{i}/{len(args.manifests)}] {name}: wrote {nbytes / 1e6:.1f} MB "
                  f"in {time.time() - t0:.1f} s", flush=True)
    if failed:
        print(f"tfjs_convert: {failed} model(s) failed", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
