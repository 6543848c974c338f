#!/usr/bin/env python3
"""Where a sequential read through a FUSE mount spends its time, from a
tracefs capture (events fuse:fuse_request_send, fuse:fuse_request_end,
sched:sched_switch and sched:sched_wakeup; `scripts/bench.sh --mount` takes
one of the cold read).

    read_trace.py TRACE DAEMON_COMM READER_COMM [BYTES_READ]

Prints four markdown table cells, one a line:
  - how many FUSE_READ requests were in flight, as shares of the time from
    the first READ sent to the last answered (0 in flight: the kernel asked
    for nothing, so only the daemon's prefetch could be working);
  - the READs' latency, p50 / p90 / max;
  - what both CPUs ran meanwhile: the daemon's threads, the reader, nothing,
    and other processes (a large share of others: the box was busy, and the
    read's wall time says little);
  - how often the daemon's threads were woken (per MB with BYTES_READ): on
    a paravirtualized guest a wake-up of a thread on the other CPU is an
    IPI, and wake-ups and futex waits took ~12% of the daemon's CPU (perf).
On 2 cores a read bound by CPU shows little idle and little 0 in flight.
"""
import re
import sys
from collections import Counter

REQUEST = re.compile(
    r"\s(\d+\.\d+): fuse_request_(send|end): connection \d+ req (\d+)"
    r"(?: opcode \d+ \((\w+)\))?")
SWITCH = re.compile(
    r"\[(\d+)\]\s+\S+\s+(\d+\.\d+): sched_switch: prev_comm=(.*?) prev_pid=\d+"
    r" .*?==> next_comm=(.*?) next_pid=")
WAKEUP = re.compile(r"\s(\d+\.\d+): sched_wakeup: comm=(.*?) pid=\d+")
# The ring buffer overflowed: events are missing, the shares are partial.
LOST = re.compile(r"\[LOST (\d+) EVENTS\]")


def main(path, daemon, reader, bytes_read=None):
    requests, switches, wakeups, lost = [], [], [], 0
    with open(path, errors="replace") as f:
        for line in f:
            m = SWITCH.search(line)
            if m:
                switches.append((float(m[2]), int(m[1]), m[3], m[4]))
                continue
            m = WAKEUP.search(line)
            if m:
                if m[2].startswith(daemon):
                    wakeups.append(float(m[1]))
                continue
            m = LOST.search(line)
            if m:
                lost += int(m[1])
                continue
            m = REQUEST.search(line)
            if m:
                requests.append((float(m[1]), m[2], int(m[3]), m[4]))
    reads = {r for _, kind, r, op in requests
             if kind == "send" and op == "FUSE_READ"}
    events = [(t, kind, r) for t, kind, r, _ in requests if r in reads]
    if not events:
        print("no READs traced\n\n\n")
        return
    start, end = events[0][0], events[-1][0]
    span = max(end - start, 1e-9)

    in_flight, sent, latency = Counter(), {}, []
    last = start
    for t, kind, r in events:
        in_flight[min(len(sent), 4)] += t - last
        last = t
        if kind == "send":
            sent[r] = t
        elif r in sent:
            latency.append(t - sent.pop(r))
    print("  ".join("%s%s: %.0f%%" % (k, "+" if k == 4 else "",
                                       100 * v / span)
                    for k, v in sorted(in_flight.items())))
    latency.sort()
    n = len(latency)
    print("%d READs, %.2f / %.2f / %.2f ms" %
          (n, 1e3 * latency[n // 2], 1e3 * latency[9 * n // 10],
           1e3 * latency[-1]) if n else "no READ answered")

    def kind_of(comm):
        if comm.startswith("swapper"):
            return "idle"
        if comm.startswith(daemon):
            return "daemon"
        if comm == reader:
            return "reader"
        return "other"

    woken = sum(1 for t in wakeups if start <= t <= end)
    wakeup_text = "%d" % woken + (
        " (%.1f per MB)" % (woken / (int(bytes_read) / 1e6))
        if bytes_read else "")
    if not switches:
        print("no scheduler events")
        print(wakeup_text)
        return
    ran, running = Counter(), {}
    for t, cpu, prev, comm in switches + [(end, c, None, None)
                                          for c in range(1024)]:
        # Before a CPU's first switch, what it ran is the first switch's
        # prev_comm.
        since, who = running.get(cpu, (start, prev))
        if who is not None:
            overlap = min(t, end) - max(since, start)
            if overlap > 0:
                ran[kind_of(who)] += overlap
        if comm is not None:
            running[cpu] = (t, comm)
    cpus = max(len(running), 1)
    print(" / ".join("%.0f%%" % (100 * ran[k] / (cpus * span))
                     for k in ("daemon", "reader", "idle", "other")) +
          " of %d CPUs" % cpus +
          (" (the trace lost %d events: partial)" % lost if lost else ""))
    print(wakeup_text)


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    main(*sys.argv[1:])
