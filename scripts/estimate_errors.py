#!/usr/bin/env python3
"""Regions whose coded size exceeds the chooser's estimate.

usage: estimate_errors.py BREVIS FILE... [--ratio 1.05] [--bytes 1024]
       [--archives DIR [--reuse]] [--summary]

Compresses each FILE (-T1) with BREVIS, reads `brevis inspect` and lists the
regions whose actual bytes exceed the estimated bytes by more than --ratio
and --bytes (a wrong estimate picks a worse program), then the total archive
bytes. The actual bytes are the payload alone (a program's tables, shared
by regions, are not told apart per region), the estimate also counts the
tables: it is exceeded by more than it shows. With --archives,
the archives are kept there (named FILE.brv); with --reuse, those already
there are inspected without compressing again.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# name dtype shape in out ratio estimated expansions ms program
LINE = re.compile(r"^(.*?)\s+(\S+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\d+)"
                  r"\s+(\d+)\s+(\S+)\s+(.*)$")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("brevis")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--ratio", type=float, default=1.05)
    ap.add_argument("--bytes", type=int, default=1024)
    ap.add_argument("--archives")
    ap.add_argument("--reuse", action="store_true")
    ap.add_argument("--summary", action="store_true",
                    help="only the per-file and total lines")
    a = ap.parse_args()
    out_dir = a.archives or tempfile.mkdtemp()
    os.makedirs(out_dir, exist_ok=True)
    total = total_in = 0
    count = excess = 0
    for f in a.files:
        arc = os.path.join(out_dir, os.path.basename(f) + ".brv")
        if not (a.reuse and os.path.exists(arc)):
            subprocess.run([a.brevis, "compress", "-T1", "-q", "-f", "-k",
                            "-o", arc, f], check=True,
                           stdout=subprocess.DEVNULL)
        size = os.path.getsize(arc)
        total += size
        total_in += os.path.getsize(f)
        text = subprocess.run([a.brevis, "inspect", "-T1", arc], check=True,
                              capture_output=True, text=True).stdout
        for line in text.splitlines()[1:]:
            m = LINE.match(line)
            if not m:
                continue
            name, dtype, actual, est = m[1], m[2], int(m[5]), int(m[7])
            if est == 0:
                continue  # not recorded (a trivial or literal region)
            if actual > est * a.ratio and actual - est > a.bytes:
                count += 1
                excess += actual - est
                if not a.summary:
                    print(f"{os.path.basename(f)}\t{name}\t{dtype}\tin "
                          f"{m[4]}\test {est}\tactual {actual}\t"
                          f"x{actual / max(est, 1):.3f}\texp {m[8]}\t{m[10]}")
        print(f"# {os.path.basename(f)}\t{size}", file=sys.stderr)
        if a.archives is None and not a.reuse:
            os.unlink(arc)
    print(f"total {total} bytes ({total_in} in), {count} regions over the "
          f"estimate by {excess} bytes")


if __name__ == "__main__":
    main()
