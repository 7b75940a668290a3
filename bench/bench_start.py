"""Benchmark: a window query's first micro-batch from a cold start, with and without Python
workers warmed beside its build (``jetspark.warm_workers``, on by default).

Each run is a new process with a new local Spark (local[2], 2 shuffle partitions), so every
Python worker starts cold, as after a driver restart. It fills a topic with the examples'
120 positions, builds ``read_kafka_stream`` → ``window_aggregate`` (tumbling 10 s) → ``noop``,
starts it and times, from ``start()``, the first progress and micro-batch 0's
``triggerExecution``. ``warm`` runs are what jetspark does by default: ``read_kafka_stream``
and ``window_aggregate`` each start, in a thread beside the query's build, a Spark job whose
tasks each hold two Python workers that import what the query's workers import (jetkafka's
reader and writer; jetspark's windowing stages and pandas); Spark keeps those workers and
hands them the query's first tasks, which then skip the imports. ``cold`` runs set
``spark.jetspark.warmPythonWorkers=false``.

Runs alternate (cold first); the medians of ``--repeat`` runs of each are printed with the load
average, and a report goes to ``bench/reports/``. Needs Kafka (``JETSPARK_KAFKA_BOOTSTRAP``, else
``jetspark services up kafka``).

    .venv/bin/python bench/bench_start.py [--repeat 3]

``--attribute`` instead attributes the start-up, jetspark's pipeline beside Spark's own
(``format("kafka")`` → ``withWatermark`` → ``groupBy(window(…))``, the same aggregates, the
same ``noop`` sink and state store). Each contender runs in a process of its own (a new Spark
application): the query from a fresh checkpoint (``cold``), stopped after its first
micro-batch, then restarted from its checkpoint in the same session (``warm``: a restart
after a deploy or a crash, Spark's idle Python workers still there) over 120 more events.
Every Python process of the run writes what it does (``bench/start_trace/sitecustomize.py``,
put on the workers' ``PYTHONPATH``); printed per start: each process and each task of a
forked worker, with its kind (source planner, reader, state worker, sink, warm-up, …), what it
runs, when it started (s after the build began), its interpreter start-up, its imports and
what it waited for; then the first micro-batch's phases (the progress's ``durationMs``) and its
state operator's figures (update, commit, RocksDB's commit phases). A report goes to
``bench/reports/``. Figures taken on a loaded machine attribute but do not compare across
days: run it on a quiet one (``uptime``) for figures to quote.

    .venv/bin/python bench/bench_start.py --attribute [--contenders spark,jetspark]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid

from kafka_bench import ROOT, kafka_bootstrap, write_report


def one_run(mode: str, bootstrap: str) -> dict:
    """One cold start (this process's own Spark): seconds from ``start()`` to the first progress,
    micro-batch 0's milliseconds, and the build's seconds."""
    from pyspark_jetkafka import DefaultSource
    from start_attribution import window_query

    # imported before the clock starts: the build is timed, not these imports
    from jetspark.datasources import read_kafka_stream  # noqa: F401
    from jetspark.devtools.spark import local_session
    from jetspark.examples import positions
    from jetspark.warm_workers import CONF as WARM_WORKERS
    from jetspark.windowing import ops, tumbling, window_aggregate  # noqa: F401

    warm = {WARM_WORKERS: "true" if mode == "warm" else "false"}
    spark = local_session("bench-start", shuffle_partitions=2, conf=warm)
    spark.dataSource.register(DefaultSource)
    topic = f"jetbench-start-{uuid.uuid4().hex[:8]}"
    positions(bootstrap, topic)
    t0 = time.perf_counter()
    windows = window_query("jetspark", spark, bootstrap, topic)
    built = time.perf_counter()
    query = (windows.writeStream.format("noop")
             .option("checkpointLocation", f"/tmp/jetbench-start/{topic}").start())
    started = time.perf_counter()
    while query.lastProgress is None:
        time.sleep(0.02)
    first = time.perf_counter()
    batch0 = query.lastProgress["durationMs"].get("triggerExecution")
    query.stop()
    spark.stop()
    return {"build_s": built - t0, "first_progress_s": first - started, "batch0_ms": batch0,
            "build_to_first_progress_s": first - t0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--attribute", action="store_true", help="attribute the start-up (see above)")
    ap.add_argument("--contenders", default="spark,jetspark", help="with --attribute: spark, jetspark")
    ap.add_argument("--run", choices=["cold", "warm"], help=argparse.SUPPRESS)  # one run, in a child
    ap.add_argument("--attribute-run", choices=["spark", "jetspark"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    bootstrap = kafka_bootstrap("native")
    if args.attribute_run:
        import start_attribution

        print(json.dumps(start_attribution.child_run(args.attribute_run, bootstrap)), flush=True)
        return 0
    if args.attribute:
        import start_attribution

        return start_attribution.attribute(args.contenders.split(","), bootstrap, __file__)
    if args.run:
        print(json.dumps(one_run(args.run, bootstrap)), flush=True)
        return 0
    runs: dict[str, list[dict]] = {"cold": [], "warm": []}
    env = {**os.environ, "JETSPARK_KAFKA_BOOTSTRAP": bootstrap}
    for r in range(args.repeat):
        for mode in runs:
            out = subprocess.run([sys.executable, __file__, "--run", mode], env=env, capture_output=True,
                                 text=True, check=True).stdout
            got = json.loads(out.strip().splitlines()[-1])
            runs[mode].append(got)
            print(f"run {r + 1} {mode}: first progress {got['first_progress_s']:.2f} s after start() "
                  f"({got['build_to_first_progress_s']:.2f} s after the build began), "
                  f"micro-batch 0 {got['batch0_ms']} ms, build {got['build_s']:.2f} s  "
                  f"load {os.getloadavg()[0]:.2f}", flush=True)
    median = {m: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for m, rs in runs.items()}
    load = os.getloadavg()
    cold, warm = median["cold"], median["warm"]
    print(f"median of {args.repeat}: first progress cold {cold['first_progress_s']:.2f} s, "
          f"warm {warm['first_progress_s']:.2f} s after start(); from the build's beginning cold "
          f"{cold['build_to_first_progress_s']:.2f} s, warm {warm['build_to_first_progress_s']:.2f} s; "
          f"build cold {cold['build_s']:.2f} s, warm {warm['build_s']:.2f} s; "
          f"micro-batch 0 cold {cold['batch0_ms']:.0f} ms, "
          f"warm {warm['batch0_ms']:.0f} ms; load average " + " ".join(f"{x:.2f}" for x in load))
    write_report("start", {"runs": runs, "median": median, "master": "local[2]", "load_average": load})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
