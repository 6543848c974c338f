#!/usr/bin/python3
"""Counts reads that see zeros while another descriptor truncates the file.

A diagnostic, not a test (the count depends on scheduling): two readers
check every byte they read from FILE (in a FUSE mount, say) while a writer
cuts the file at a random page and writes the rest back, for SECONDS. The
file's bytes are never zero, so a zero byte is a wrong read; a short read is
fine. With the kernel's writeback cache a FUSE filesystem gets some: the
kernel fills a short READ reply with zeros up to the size it knows, and
learns a truncate's size only from its reply (fs/fuse/resize_gate.h).

  /usr/bin/python3 scripts/truncate_race.py FILE [SECONDS] [--direct] [--sync]

--direct reads with O_DIRECT; --sync fsyncs after each rewrite (no dirty
pages when the next truncate comes). Prints reads, short reads, bad reads.
"""
import argparse
import mmap
import os
import random
import threading
import time

SIZE = 4 << 20
READ = 128 << 10


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("seconds", nargs="?", type=float, default=10)
    ap.add_argument("--direct", action="store_true")
    ap.add_argument("--sync", action="store_true")
    a = ap.parse_args()
    content = bytes(1 + i % 251 for i in range(SIZE))
    with open(a.file, "wb") as f:
        f.write(content)
    stop = threading.Event()
    counts = {"reads": 0, "short": 0, "bad": 0}
    lock = threading.Lock()

    def reader(seed):
        rnd = random.Random(seed)
        fd = os.open(a.file, os.O_RDONLY | (os.O_DIRECT if a.direct else 0))
        buf = mmap.mmap(-1, READ)  # page-aligned, as O_DIRECT needs
        while not stop.is_set():
            off = rnd.randrange(SIZE // 4096) * 4096
            n = os.preadv(fd, [buf], off)
            bad = buf[:n] != content[off:off + n]
            with lock:
                counts["reads"] += 1
                counts["short"] += n < READ
                counts["bad"] += bad
        os.close(fd)

    def writer():
        rnd = random.Random(7)
        fd = os.open(a.file, os.O_WRONLY)
        while not stop.is_set():
            cut = rnd.randrange(SIZE // 4096) * 4096
            os.ftruncate(fd, cut)
            os.pwrite(fd, content[cut:], cut)
            if a.sync:
                os.fsync(fd)
        os.close(fd)

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(2)]
    threads.append(threading.Thread(target=writer))
    for t in threads:
        t.start()
    time.sleep(a.seconds)
    stop.set()
    for t in threads:
        t.join()
    print("reads {reads} short {short} bad {bad}".format(**counts))


if __name__ == "__main__":
    main()
