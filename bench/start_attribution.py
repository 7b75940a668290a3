"""``bench_start.py --attribute``: where a window query's start-up goes, jetspark's beside Spark's.

:func:`child_run` runs in a process of its own with ``start_trace/`` on ``PYTHONPATH``: a cold
start and a warm restart of one contender's query; :func:`attribute` runs it per contender,
reads the trace every Python process wrote (``start_trace/sitecustomize.py``) and prints, per
start, the Python processes and worker tasks with their kinds, then the first micro-batch's
phases and state commit side by side.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path

from kafka_bench import write_report

TRACE_DIR = Path(__file__).resolve().parent / "start_trace"
TRACE_ENV = "JETSPARK_START_TRACE"
STARTS = ("cold", "warm")
#: PySpark's runner modules (started outside the daemon, on the driver) → the kind of process.
RUNNERS = {
    "pyspark.sql.streaming.python_streaming_source_runner": "source planner",
    "pyspark.sql.worker.python_streaming_sink_runner": "sink commit",
    "pyspark.sql.worker.create_data_source": "data source create",
    "pyspark.sql.worker.write_into_data_source": "sink planner",
    "pyspark.sql.worker.plan_data_source_read": "read planner",
    "pyspark.sql.worker.lookup_data_sources": "format lookup",
    "pyspark.sql.worker.commit_data_source_write": "batch commit",
    "pyspark.sql.worker.data_source_pushdown_filters": "read planner (filters)",
    "pyspark.worker": "worker",
}
#: A forked worker's task → its kind, by the function it runs and the classes it holds.
TASK_KINDS = (("jetspark.warm_workers", "warm-up"), ("windowing.stateful", "state worker"),
              ("accumulate_by_frame", "window stage 1"), ("StreamReader", "source reader"),
              ("datasources", "source reader"), ("Writer", "sink writer"), ("sinks", "sink writer"))
STATE_FIGURES = ("allUpdatesTimeMs", "allRemovalsTimeMs", "commitTimeMs", "numRowsTotal", "numRowsUpdated")


def mark(name: str) -> None:
    """A point of the run in the trace (the driver's own ``sitecustomize`` writes it)."""
    import sitecustomize

    if getattr(sitecustomize, "_PATH", None):
        sitecustomize._emit("mark", name=name)


def _more_positions(bootstrap: str, topic: str, shift_s: int) -> None:
    """The examples' 120 positions again, ``shift_s`` later in event time."""
    from confluent_kafka import Producer

    from jetspark.examples import SECONDS, T0, VEHICLES, speed_of

    producer = Producer({"bootstrap.servers": bootstrap})
    t0_ms = int(T0.timestamp() * 1000) + shift_s * 1000
    for second in range(SECONDS):
        for k in range(1, VEHICLES + 1):
            value = json.dumps({"vehicle": f"v{k}", "speed": speed_of(k, second)})
            producer.produce(topic, value=value.encode(), key=f"v{k}".encode(), partition=k % 2,
                             timestamp=t0_ms + second * 1000)
    producer.flush(30)


def window_query(contender: str, spark, bootstrap: str, topic: str):
    """The measured query: 10-second tumbling windows per vehicle, by Spark's `window()`
    (contender "spark") or by jetspark's read_kafka_stream + window_aggregate."""
    from pyspark.sql import functions as F

    if contender == "spark":
        src = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
               .option("subscribe", topic).option("startingOffsets", "earliest").load())
        events = src.select(
            F.col("key").cast("string").alias("vehicle"), "timestamp",
            F.get_json_object(F.col("value").cast("string"), "$.speed").cast("double").alias("speed"))
        return (events.withWatermark("timestamp", "5 seconds")
                .groupBy(F.window("timestamp", "10 seconds").alias("w"), "vehicle")
                .agg(F.count(F.lit(1)).alias("n"), F.max("speed").alias("max_speed")))
    from jetspark.datasources import read_kafka_stream
    from jetspark.windowing import ops, tumbling, window_aggregate

    stream = read_kafka_stream(spark, {"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                                       "startingOffsets": "earliest", "watermark.lag": "5 seconds"})
    events = stream.select(
        F.col("key").cast("string").alias("vehicle"), "timestamp",
        F.get_json_object(F.col("value").cast("string"), "$.speed").cast("double").alias("speed"),
        "watermark", "heartbeat")
    return window_aggregate(events, key="vehicle", time="timestamp", window=tumbling("10 seconds"),
                            aggs={"n": ops.count(), "max_speed": ops.max_("speed")})


def _progress(query) -> dict:
    p = query.lastProgress
    return json.loads(p.json) if hasattr(p, "json") else json.loads(json.dumps(dict(p), default=str))


def child_run(contender: str, bootstrap: str) -> dict:
    """A cold start and a warm restart of ``contender``'s query in one new Spark application:
    per start, when its build began, ``start()`` was called and the first progress came, and
    that progress."""
    from pyspark_jetkafka import DefaultSource

    from jetspark.devtools.maven import SPARK_KAFKA, spark_jars_conf
    from jetspark.devtools.spark import local_session
    from jetspark.examples import positions

    mark("session")
    spark = local_session("bench-start-attribute", shuffle_partitions=2, conf=spark_jars_conf(SPARK_KAFKA))
    spark.dataSource.register(DefaultSource)
    topic = f"jetbench-start-{uuid.uuid4().hex[:8]}"
    positions(bootstrap, topic)
    checkpoint = tempfile.mkdtemp(prefix="jetbench-start-")
    out: dict = {}
    for start in STARTS:
        if start == "warm":
            _more_positions(bootstrap, topic, shift_s=60)
        mark(f"{start}:build")
        t0 = time.time()
        windows = window_query(contender, spark, bootstrap, topic)
        built = time.time()
        mark(f"{start}:start")
        query = windows.writeStream.format("noop").option("checkpointLocation", checkpoint).start()
        started = time.time()
        while query.lastProgress is None:
            if query.exception() is not None:
                raise RuntimeError(f"{contender} {start}: {query.exception()}")
            time.sleep(0.02)
        first = time.time()
        mark(f"{start}:first-progress")
        out[start] = {"build_began": t0, "built": built, "started": started, "first_progress": first,
                      "progress": _progress(query)}
        query.stop()
        mark(f"{start}:stopped")
    spark.stop()
    return out


def attribute(contenders: list[str], bootstrap: str, script: str) -> int:
    """Run each contender (in a process of its own, in the order given) and print its start-up."""
    results: dict = {}
    for contender in contenders:
        # kept (its path printed): a worker that outlives the run may still append to it
        trace = Path(tempfile.mkdtemp(prefix="jetbench-trace-")) / f"{contender}.jsonl"
        path = os.pathsep.join(filter(None, [str(TRACE_DIR), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, TRACE_ENV: str(trace), "JETSPARK_KAFKA_BOOTSTRAP": bootstrap, "PYTHONPATH": path}
        done = subprocess.run([sys.executable, script, "--attribute-run", contender], env=env,
                              capture_output=True, text=True)
        print(f"{contender}: trace {trace}", flush=True)
        events = _events(trace)
        if done.returncode != 0:
            print(f"{contender} failed: {done.stderr[-3000:]}", flush=True)
            results[contender] = {"error": done.stderr[-3000:], "trace": events}
            continue
        run = json.loads(done.stdout.strip().splitlines()[-1])
        results[contender] = {start: {**run[start], "rows": rows(events, run[start])} for start in STARTS}
        results[contender]["trace"] = events
        for start in STARTS:
            print_start(contender, start, results[contender][start])
    print_batches({c: r for c, r in results.items() if "error" not in r})
    load = os.getloadavg()
    print("load average: " + " ".join(f"{x:.2f}" for x in load)
          + ("  (a loaded machine: these figures attribute, they do not compare; quote a quiet run's)"
             if load[0] > 1.5 else ""))
    write_report("start-attribution", {"results": results, "master": "local[2]", "load_average": load})
    return 0


def _events(trace: Path) -> list[dict]:
    """The trace's events (a line still being written by a worker that outlived the run is left out)."""
    events = []
    for line in trace.read_text().splitlines() if trace.exists() else []:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def _task_kind(task: dict) -> str:
    described = " ".join(task.get("functions", []))
    if task.get("job_group") == "jetspark-warm-python-workers":
        return "warm-up"
    return next((kind for needle, kind in TASK_KINDS if needle in described), "python task")


def _top_parts(imports: list[dict], n: int = 4) -> str:
    parts: dict[str, float] = defaultdict(float)
    for e in imports:
        for g, ms in e.get("parts", {}).items():
            parts[g] += ms
    return ", ".join(f"{g} {ms:.0f}" for g, ms in sorted(parts.items(), key=lambda kv: -kv[1])[:n])


def _worker_module(cmd: list[str]) -> str:
    """The module a process runs (``-m``), or for PySpark's daemon the module its forked
    workers run (the daemon's argument; PySpark's worker when there is none)."""
    if "-m" not in cmd:
        return ""
    i = cmd.index("-m") + 1
    module = cmd[i] if i < len(cmd) else ""
    if module == "pyspark.daemon":
        return cmd[i + 1] if i + 1 < len(cmd) else "pyspark.worker"
    return module


def _process_kind(proc: dict | None, fork: dict | None, by_pid: dict) -> tuple[str, str]:
    """A process's kind and module: a runner by its module, PySpark's daemon by its workers'
    module, a forked worker by its daemon's."""
    if proc is None:  # forked: what its daemon forks for
        parent = (by_pid.get(fork["ppid"], {}).get("process") or [None])[0] if fork else None
        if parent is None or "pyspark.daemon" not in parent["cmd"]:
            return "", ""  # a fork that went on to exec (the JVM, a subprocess): its own process event says
        module = _worker_module(parent["cmd"])
        return RUNNERS.get(module, "worker") + " (forked)", module
    cmd = proc["cmd"]
    if "--attribute-run" in cmd:
        return "driver", "bench_start"
    if "-c" in cmd and "version_info" in " ".join(cmd):
        return "Python version check", "python -c"
    module = _worker_module(cmd)
    if "pyspark.daemon" in cmd:
        return f"daemon: {RUNNERS.get(module, module)}", f"pyspark.daemon {module}"
    return RUNNERS.get(module, module or "python"), module


def rows(events: list[dict], run: dict) -> list[dict]:
    """The Python processes started and the worker tasks begun between the build's beginning
    and the first progress, in time order (times in s after the build began, ms for spans)."""
    lo, hi = run["build_began"], run["first_progress"]
    by_pid: dict[int, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for e in events:
        by_pid[e["pid"]][e["ev"]].append(e)
    out = []
    for pid, evs in by_pid.items():
        proc = (evs.get("process") or [None])[0]
        fork = (evs.get("fork") or [None])[0]
        imports = [e for e in evs.get("import", []) if lo <= e["t"] <= hi]
        began = proc["started"] if proc else fork["t"] if fork else None
        if proc and "--attribute-run" in proc["cmd"] and imports:  # the driver: what the build imported
            out.append({"at_s": imports[0]["t"] - imports[0]["ms"] / 1000 - lo, "pid": pid,
                        "kind": "driver (the build)", "what": ", ".join(e["module"] for e in imports[:4]),
                        "startup_ms": 0.0, "imports_ms": sum(e["ms"] for e in imports),
                        "import_parts": _top_parts(imports), "waited": ""})
        elif began is not None and lo <= began <= hi:
            kind, module = _process_kind(proc, fork, by_pid)
            if not kind:
                continue
            connected = (evs.get("connected") or [None])[0]
            tasks = evs.get("task", [])  # a task's imports are on the task's row
            imports = [e for e in imports if not any(t["began"] <= e["t"] <= t["t"] for t in tasks)]
            forks = sorted(e["t"] for p in by_pid.values() for e in p.get("fork", []) if e["ppid"] == pid)
            waited = (f"connected back {(connected['t'] - began) * 1000:.0f} ms after its start" if connected
                      else f"first worker forked {(forks[0] - began) * 1000:.0f} ms after its start "
                           "(the JVM waits for the daemon's imports)" if forks and kind.startswith("daemon")
                      else "")
            out.append({"at_s": began - lo, "pid": pid, "kind": kind, "what": module,
                        "startup_ms": (proc["t"] - proc["started"]) * 1000 if proc else 0.0,
                        "imports_ms": sum(e["ms"] for e in imports),
                        "import_parts": _top_parts(imports), "waited": waited})
        previous_end = fork["t"] if fork else None
        for task in sorted(evs.get("task", []), key=lambda t: t["began"]):
            if lo <= task["began"] <= hi:
                idle = ("" if previous_end is None
                        else f"idle {(task['began'] - previous_end) * 1000:.0f} ms before")
                out.append({"at_s": task["began"] - lo, "pid": pid, "kind": _task_kind(task),
                            "what": " ".join(task.get("functions", [])[:3]),
                            "startup_ms": 0.0, "imports_ms": task.get("import_ms", 0.0),
                            "unpickle_ms": task.get("unpickle_ms", 0.0),
                            "run_ms": (task["t"] - task["began"]) * 1000,
                            "import_parts": _top_parts([e for e in evs.get("import", [])
                                                        if task["began"] <= e["t"] <= task["t"]]),
                            "waited": f"stage {task.get('stage')} part {task.get('partition')} "
                                      f"batch {task.get('batch')} {idle}".strip()})
            previous_end = task["t"]
    return sorted(out, key=lambda r: r["at_s"])


def print_start(contender: str, start: str, run: dict) -> None:
    lo = run["build_began"]
    print(f"\n{contender} {start}: build {run['built'] - lo:.2f} s, start() at {run['started'] - lo:.2f} s, "
          f"first progress at {run['first_progress'] - lo:.2f} s (s after the build began)")
    print(f"  {'at s':>6s} {'pid':>7s} {'kind':28s} {'start-up':>9s} {'imports':>8s} {'unpickle':>9s} "
          f"{'run':>7s}  what / waited / imports by group (ms)")
    for r in run["rows"]:
        print(f"  {r['at_s']:6.2f} {r['pid']:7d} {r['kind']:28s} {r['startup_ms']:9.0f} "
              f"{r['imports_ms']:8.0f} {r.get('unpickle_ms', 0):9.0f} "
              f"{r.get('run_ms', 0):7.0f}  {r['what'][:90]}")
        extra = "; ".join(x for x in (r["waited"], r["import_parts"]) if x)
        if extra:
            print(f"  {'':6s} {'':7s} {'':28s} {'':9s} {'':8s} {'':9s} {'':7s}  {extra}")
    procs = [r for r in run["rows"] if r["startup_ms"] > 0 or r["kind"].endswith("(forked)")]
    print(f"  {len(procs)} Python processes started, {sum(r['imports_ms'] for r in run['rows']):.0f} ms of "
          f"imports in them and their tasks")


def print_batches(results: dict) -> None:
    """The first micro-batch of each start, contender by contender: Spark's phases and the state
    operator's figures (custom metrics: RocksDB's commit phases)."""
    cols = [(c, s) for c in results for s in STARTS]
    table: dict[str, dict] = defaultdict(dict)
    for c, s in cols:
        p = results[c][s]["progress"]
        table["batchId"][(c, s)] = p.get("batchId")
        table["numInputRows"][(c, s)] = p.get("numInputRows")
        table["start() to first progress (ms)"][(c, s)] = (results[c][s]["first_progress"]
                                                            - results[c][s]["started"]) * 1000
        for k, v in p.get("durationMs", {}).items():
            table[f"durationMs.{k}"][(c, s)] = v
        for op in p.get("stateOperators", [])[:1]:
            for k in STATE_FIGURES:
                table[f"state.{k}"][(c, s)] = op.get(k)
            for k, v in sorted(op.get("customMetrics", {}).items()):
                if "Ms" in k or "time" in k.lower():
                    table[f"state.{k}"][(c, s)] = v
    print("\nfirst micro-batch of each start (ms unless counted)")
    print(f"  {'':44s}" + "".join(f"{c + ' ' + s:>18s}" for c, s in cols))
    for name in table:
        cells = "".join(f"{'' if table[name].get(k) is None else f'{table[name][k]:.0f}':>18s}" for k in cols)
        print(f"  {name:44s}{cells}")
