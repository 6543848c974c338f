#!/usr/bin/python3
"""Where brevis loses against the order-0 bound of scripts/entropy_bound.py.

For each safetensors FILE and its archive (DIR/NAME.brv with --archives DIR,
else compressed afresh at -T1), prints the bound bytes, the archive bytes and the gap split by cause:

  tensor payloads by size (elements: <1K, <16K, <256K, >=256K): payload bytes
      minus the tensor's bound;
  index      header + index bytes (programs with their tables, literal regions,
      names, chunk checksums; zstd-compressed) minus the bound of the regions
      held inline (`literal`, or no payload: the header, tiny tensors);
  tables     the rans_static table bytes the program texts show, before the
      index's zstd (a program shared by regions counts once per region): a part
      of the index column.

bias16: for the bf16/fp16 tensors of >= 256K elements, the plug-in bias of the
16-bit bound: the empirical entropy of K distinct words over n elements
underestimates the source entropy by about (K - 1) / (2 n ln 2) bits per
element (K << n), so no order-0 coder, which must pay for its model, reaches
it. (Smaller tensors have K close to n, where the bound is near n log2 n bits
and the term does not apply: there the bound is out of reach by far more.)

  /usr/bin/python3 scripts/bound_gap.py [--brevis BIN] [--archives DIR] FILE...
Without --archives, FILE is compressed into a temporary directory first. For a
.pt only the bound and the archive bytes are printed (its regions are zip
entries, not tensors by name); the total row then mixes both kinds.
"""
import argparse
import math
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from entropy_bound import BadFile, analyze as bound_of_file  # noqa: E402
from entropy_bound import safetensors_tensors, tensor_bounds  # noqa: E402

BUCKETS = [(1 << 10, "<1K"), (1 << 14, "<16K"), (1 << 18, "<256K"), (1 << 62, ">=256K")]
ROW = re.compile(r"^(?P<name>.*?)\s+(?P<dtype>\S+)\s+(?P<shape>\S+)\s+(?P<inb>\d+)\s+"
                 r"(?P<outb>\d+)\s+\S+\s+\d+\s+\d+\s+\S+\s+(?P<program>.*)$")
ARCHIVE = re.compile(r"^archive: (\d+) bytes \(payload (\d+), header\+index (\d+)\)")


def bucket_of(elements):
    for limit, label in BUCKETS:
        if elements < limit:
            return label
    return BUCKETS[-1][1]


def inspect_rows(brevis, archive):
    out = subprocess.run([brevis, "inspect", "-q", archive], check=True, capture_output=True,
                         text=True).stdout.splitlines()
    rows, total = [], None
    for line in out[1:]:
        m = ARCHIVE.match(line)
        if m:
            total = tuple(int(x) for x in m.groups())
            continue
        if line.startswith("total "):
            continue
        m = ROW.match(line)
        if m:
            rows.append(m.groupdict())
    return rows, total


def analyze(brevis, path, archive):
    buf = np.fromfile(path, dtype=np.uint8)
    rows, (arch, payload, index) = inspect_rows(brevis, archive)
    try:
        tensors = {t[0]: t for t in safetensors_tensors(path, buf)}
    except BadFile:  # a .pt: region names are not tensor names; totals only
        return {"bound": bound_of_file(path)[1], "ours": arch, "payload": payload,
                "index": index, "tables": 0, "inline_bound": 0.0, "bias": 0.0,
                "gap": {label: [0.0, 0.0] for _, label in BUCKETS}, "split": False}
    gap = {label: [0.0, 0.0] for _, label in BUCKETS}  # bound, ours
    inline_bound = 0.0
    tables = 0
    bias = 0.0
    for r in rows:
        t = tensors.get(r["name"])
        table = sum(int(x) for x in re.findall(r"rans_static\[(\d+)B\]", r["program"]))
        if t is None:  # the header, or a name that did not match: opaque
            inline_bound += int(r["inb"]) if r["outb"] == "0" else 0
            if r["outb"] != "0":
                gap[">=256K"][0] += int(r["inb"])
                gap[">=256K"][1] += int(r["outb"])
            tables += table
            continue
        data = t[4]
        wb, _ = tensor_bounds(t[2], data)
        if r["outb"] == "0" or r["program"].startswith("literal"):
            inline_bound += wb / 8
            continue
        elements = data.size // max(1, t[3])
        b = gap[bucket_of(elements)]
        b[0] += wb / 8
        b[1] += int(r["outb"])
        tables += table
        if t[2] in ("bf16", "fp16") and elements >= (1 << 18):
            k = np.unique(data[: 2 * (data.size // 2)].view("<u2")).size
            bias += (k - 1) / (2 * math.log(2)) / 8
    bound = sum(v[0] for v in gap.values()) + inline_bound
    return {"bound": bound, "ours": arch, "payload": payload, "index": index,
            "tables": tables, "inline_bound": inline_bound, "gap": gap, "bias": bias,
            "split": True}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brevis", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                     "brevis"))
    ap.add_argument("--archives", help="directory holding NAME.brv for each FILE")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    tmp = None if args.archives else tempfile.TemporaryDirectory()
    tot = {"bound": 0.0, "ours": 0, "index": 0, "tables": 0, "inline_bound": 0.0, "bias": 0.0,
           "gap": {label: [0.0, 0.0] for _, label in BUCKETS}}
    hdr = "file bound ours %bound | " + " ".join(f"{l}:+gap" for _, l in BUCKETS) + \
        " | index-inline tables bias16"
    print(hdr)
    for path in args.files:
        name = os.path.basename(path)
        if args.archives:
            archive = os.path.join(args.archives, name + ".brv")
        else:
            archive = os.path.join(tmp.name, name + ".brv")
            subprocess.run([args.brevis, "compress", "-q", "-f", "-T1", path, "-o", archive],
                           check=True)
        r = analyze(args.brevis, path, archive)
        for k in ("bound", "ours", "index", "tables", "inline_bound", "bias"):
            tot[k] += r[k]
        for label in r["gap"]:
            tot["gap"][label][0] += r["gap"][label][0]
            tot["gap"][label][1] += r["gap"][label][1]
        print_row(name, r)
    if len(args.files) > 1:
        print_row("total", tot)


def print_row(name, r):
    if not r.get("split", True):
        print(f"{name} {r['bound']:.0f} {r['ours']} {100 * r['bound'] / r['ours']:.3f}% | "
              "(not safetensors: no breakdown)")
        return
    gaps = " ".join(f"{v[1] - v[0]:+.0f}" for v in r["gap"].values())
    print(f"{name} {r['bound']:.0f} {r['ours']} {100 * r['bound'] / r['ours']:.3f}% | {gaps} | "
          f"{r['index'] - r['inline_bound']:+.0f} {r['tables']} {r['bias']:.0f}")


if __name__ == "__main__":
    main()
