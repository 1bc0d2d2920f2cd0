"""Where an idle STOMP connection's resident memory goes: ours beside stomp.py's.

Run: ``python benchmarks/probe_idle_memory.py [--count 50] [--top 30]``

Starts one ActiveMQ Classic broker and, for each client (``ours-stomp``, ``stomp.py-5s``: the
like-for-like rows of ``bench_idle.py``), a fresh process that opens and closes one connection
(imports and first-use set-up are nobody's per-connection cost), then opens ``count``
connections, then ``count`` more. What the second batch added, per connection, is split by
kind of memory:

* ``/proc/self/smaps`` by mapping: thread stacks (the 8 MiB mappings), glibc's per-thread malloc
  arenas (64 MiB-aligned heaps), the main heap, and other anonymous memory (Python's
  small-object arenas and each thread's 16 KiB data-stack chunk);
* Python's small-object allocator (``sys._debugmallocstats``): bytes in allocated blocks;
* glibc's ``mallinfo2``: bytes malloc handed out (objects over 512 bytes, thread states, locks).

Then, for ours, ``tracemalloc`` over the second batch: the ``--top`` allocation sites by bytes
per connection, each named by the innermost frame in this library or stomp.py. The first
batch is not measured so that arenas opened by the first connections do not count.
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import functools
import gc
import json
import os
import re
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import bench_idle
from benchmarks._common import brokers, log

_HEAP = 64 << 20  # glibc's HEAP_MAX_SIZE on 64-bit: a thread arena's heaps are aligned to it
_STACK = 8 << 20  # the default thread stack (ulimit -s)


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _mappings() -> dict[str, int]:
    """Resident KiB by kind of mapping."""
    kinds: collections.Counter[str] = collections.Counter()
    kind = ""
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = re.match(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$", line)
            if head:
                start, end = int(head[1], 16), int(head[2], 16)
                perms, name = head[3], head[4].strip()
                if name == "[heap]":
                    kind = "glibc main heap"
                elif name:
                    kind = "files, main stack, other named"
                elif not perms.startswith("rw"):
                    kind = "guard pages"
                elif end - start == _STACK:
                    kind = "thread stacks"
                elif start % _HEAP == 0:
                    kind = "glibc thread arenas"
                else:
                    kind = "other anonymous (Python arenas, data stacks)"
            elif line.startswith("Rss:"):
                kinds[kind] += int(line.split()[1])
    return dict(kinds)


def _python_blocks() -> int:
    """Bytes in the small-object allocator's allocated blocks."""
    read, write = os.pipe()
    saved = os.dup(2)
    os.dup2(write, 2)  # _debugmallocstats writes to the C stderr
    try:
        sys._debugmallocstats()
    finally:
        os.dup2(saved, 2)
        os.close(write)
        os.close(saved)
    with os.fdopen(read) as text:
        for line in text:
            if line.startswith("# bytes in allocated blocks"):
                return int(line.split("=")[1].replace(",", ""))
    return 0


def _sample() -> dict[str, float]:
    gc.collect()
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    info = libc.mallinfo2()
    return {
        "RSS": bench_idle._rss() / 1024,
        **{k: float(v) for k, v in _mappings().items()},
        "Python small objects (allocated)": _python_blocks() / 1024,
        "malloc in use": info.uordblks / 1024,
    }


def _sites(
    before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, count: int, top: int
) -> list[str]:
    by_site: collections.Counter[str] = collections.Counter()
    for stat in after.compare_to(before, "traceback"):
        site = f"{Path(stat.traceback[-1].filename).name}:{stat.traceback[-1].lineno}"
        for frame in reversed(stat.traceback):
            if "failover_client" in frame.filename or "/stomp/" in frame.filename:
                path = frame.filename.split("site-packages/")[-1]
                site = f"{path.split('failover_client/')[-1]}:{frame.lineno}"
                break
        by_site[site] += stat.size_diff
    total = sum(by_site.values())
    lines = [f"traced Python allocations: {total / count:.0f} B per connection"]
    lines += [f"{size / count:8.0f} B  {site}" for site, size in by_site.most_common(top)]
    return lines


def child(client: str, uri: str, count: int, top: int, trace: bool) -> dict[str, Any]:
    """Open two batches of ``count`` connections; what the second added, per connection (with
    ``trace``: its ``top`` allocation sites instead, since tracemalloc's own records would
    count as the client's memory)."""
    opener = (
        bench_idle._ours
        if client == "ours-stomp"
        else functools.partial(bench_idle._stomp_py, heartbeats=bench_idle.HEARTBEATS[client])
    )
    bench_idle._close(client, opener(uri))
    time.sleep(bench_idle.SETTLE)
    conns = [opener(uri) for _ in range(count)]
    time.sleep(bench_idle.SETTLE)
    first = {} if trace else _sample()
    if trace:
        tracemalloc.start(25)
        snap0 = tracemalloc.take_snapshot()
    conns += [opener(uri) for _ in range(count)]
    time.sleep(bench_idle.SETTLE)
    sites: list[str] = []
    if trace:
        snap1 = tracemalloc.take_snapshot()
        tracemalloc.stop()
        sites = _sites(snap0, snap1, count, top)
    second = {} if trace else _sample()
    return {
        "client": client,
        "connections": len(conns),
        "first": first,
        "second": second,
        "sites": sites,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=50)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    with brokers(1, kind="activemq", full_jit=False, label="idle-memory") as amq:
        uri = amq[0].uri("stomp")
        for client in ("ours-stomp", "stomp.py-5s"):
            log(f"{client}: 2 x {args.count} connections")
            for traced in (False, True):
                argv = [sys.executable, __file__, "--child", client, uri, str(args.count)]
                argv += [str(args.top), "trace" if traced else "sizes"]
                if traced and client != "ours-stomp":
                    continue
                done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=True)
                result = json.loads(done.stdout.strip().splitlines()[-1])
                if traced:
                    print("\n".join(result["sites"]))
                    continue
                first, second = result["first"], result["second"]
                batch = f"{args.count + 1}-{2 * args.count}"
                print(f"\n{client}: KiB per connection added by connections {batch}")
                for key in sorted(second, key=lambda k: (k != "RSS", k)):
                    print(f"  {key:46s} {(second[key] - first.get(key, 0.0)) / args.count:6.1f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        name, target, n, top_n, mode = sys.argv[2:7]
        result = child(name, target, int(n), int(top_n), trace=mode == "trace")
        print(json.dumps(result), flush=True)
        os._exit(0)  # daemon threads of the connections: no orderly teardown to measure
    main()
