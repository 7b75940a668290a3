"""Benchmark: jetrabbitmq's dedup store with millions of committed IDs in the retention.

Fills a store with ``--ids`` IDs (default 10 million, 36-character UUID-like IDs) in commits
of ``--batch`` IDs (default 20 000, as a driver would), then, in a fresh process: the time to
open it (a restart), the process's resident memory after opening and after lookups, and
lookups per second for batches of ``--batch`` IDs (all new IDs, the common case, and all
committed ones, the crash-redelivery case). Memory budget: ``--memory`` (the ``dedupMemory``
option). A report goes to ``bench/reports/``.

    .venv/bin/python bench/bench_jetrabbitmq_dedup.py [--ids 10000000] [--memory 32MB]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _ids(start: int, n: int) -> list[str]:
    return [f"{i:08x}-7a1c-4e5f-9b2d-{i * 2654435761 % (1 << 48):012x}" for i in range(start, start + n)]


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def fill(path: str, ids: int, batch: int, memory: int) -> float:
    from jetspark.datasources.rabbitmq.dedup import DedupStore

    store = DedupStore(path, retention_ms=10**12, memory_bytes=memory)
    t0 = time.perf_counter()
    for seq, start in enumerate(range(0, ids, batch), 1):
        store.add(_ids(start, min(batch, ids - start)), end_seq=seq)
    return time.perf_counter() - t0


def probe(path: str, ids: int, batch: int, memory: int, rounds: int = 5) -> dict:
    """In a fresh process: open time, memory, lookup rates."""
    import random

    rss_before = _rss_mb()
    from jetspark.datasources.rabbitmq.dedup import DedupStore

    rss_imported = _rss_mb()
    t0 = time.perf_counter()
    store = DedupStore(path, retention_ms=10**12, memory_bytes=memory)
    open_s = time.perf_counter() - t0
    rss_open = _rss_mb()
    rng = random.Random(7)
    new_rates, old_rates = [], []
    for _ in range(rounds):
        fresh = _ids(ids + rng.randrange(10**9), batch)
        t0 = time.perf_counter()
        hits = store.contains_many(fresh)
        new_rates.append(batch / (time.perf_counter() - t0))
        assert not hits.any(), "a new ID was reported as committed"
        start = rng.randrange(0, max(1, ids - batch))
        committed = _ids(start, batch)
        t0 = time.perf_counter()
        hits = store.contains_many(committed)
        old_rates.append(batch / (time.perf_counter() - t0))
        assert hits.all(), "a committed ID was missed"
    return {
        "open_s": open_s, "segments": len(store._segments), "ids_in_store": len(store),
        "filter_bytes": store.memory_used, "rss_python_mb": rss_before, "rss_imported_mb": rss_imported,
        "rss_after_open_mb": rss_open, "rss_after_lookups_mb": _rss_mb(),
        "lookups_per_s_new_ids": sorted(new_rates)[len(new_rates) // 2],
        "lookups_per_s_committed_ids": sorted(old_rates)[len(old_rates) // 2],
    }


def main() -> None:
    from jetspark.options import Options

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ids", type=int, default=10_000_000)
    ap.add_argument("--batch", type=int, default=20_000)
    ap.add_argument("--memory", default="32MB")
    ap.add_argument("--probe", help=argparse.SUPPRESS)
    args = ap.parse_args()
    memory = Options({"m": args.memory}).size_bytes("m", 32 << 20)
    if args.probe:
        print(json.dumps(probe(args.probe, args.ids, args.batch, memory)))
        return
    with tempfile.TemporaryDirectory(prefix="dedup-bench-") as path:
        print(f"filling a store with {args.ids:,} IDs in commits of {args.batch:,} …", flush=True)
        fill_s = fill(path, args.ids, args.batch, memory)
        disk = sum(f.stat().st_size for f in Path(path, "dedup").iterdir())
        cmd = [sys.executable, __file__, "--ids", str(args.ids), "--batch", str(args.batch),
               "--memory", args.memory, "--probe", path]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True,
                             env=dict(os.environ, PYTHONPATH=str(ROOT)))
        result = json.loads(out.stdout.strip().splitlines()[-1])
    result.update(ids=args.ids, batch=args.batch, memory_budget_bytes=memory, fill_s=fill_s,
                  disk_bytes=disk, load_average=os.getloadavg())
    lines = [
        f"IDs in the retention      {args.ids:,} in {result['segments']} segments, "
        f"{disk / 2**20:.0f} MB on disk",
        f"fill (commits of {args.batch:,})  {fill_s:.1f} s",
        f"open (restart)            {result['open_s'] * 1000:.0f} ms",
        f"Bloom filters in memory   {result['filter_bytes'] / 2**20:.1f} MB (budget {memory / 2**20:.0f} MB)",
        f"driver RSS                {result['rss_imported_mb']:.0f} MB after imports, "
        f"{result['rss_after_open_mb']:.0f} MB after open, "
        f"{result['rss_after_lookups_mb']:.0f} MB after lookups",
        f"lookups/s, new IDs        {result['lookups_per_s_new_ids']:,.0f} (batches of {args.batch:,})",
        f"lookups/s, committed IDs  {result['lookups_per_s_committed_ids']:,.0f} (crash redeliveries)",
        f"load average              {' '.join(f'{x:.2f}' for x in result['load_average'])}",
    ]
    print("\n".join(lines))
    reports = ROOT / "bench" / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (reports / f"jetrabbitmq-dedup-{stamp}.json").write_text(json.dumps(result, indent=2))
    report = "# jetrabbitmq dedup store\n\n```\n" + "\n".join(lines) + "\n```\n"
    (reports / f"jetrabbitmq-dedup-{stamp}.md").write_text(report)


if __name__ == "__main__":
    main()
