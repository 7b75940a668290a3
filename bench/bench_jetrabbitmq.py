"""Messages per second: jetrabbitmq -> noop sink vs a plain pika consumer (the ceiling).

Both drain the same queue filled with the same messages. The ceiling is pika's blocking
consumer with manual acks (prefetch as jetrabbitmq's, one ``multiple`` ack per prefetch
window): no WAL, no dedup, no Spark. jetrabbitmq runs with ``Trigger.AvailableNow`` into
Spark's ``noop`` sink; its time includes the query start (the Spark session is warm); the
steady rate leaves out
the first batch (Python workers starting). ``--repeat`` (3) runs of each, alternating which
goes first; medians, with the load average.

Both contenders share the machine with the broker, whose CPU time per message is the same
for both (it delivers and takes acks either way). So each run also records CPU seconds by
who spent them (Linux ``/proc``): the broker (``beam.smp``), Spark's JVM, the driver-side
Python source runner (jetrabbitmq's driver: consuming, WAL, dedup), the executors' Python
workers, this process (the pika consumer) and the machine as a whole. On a small machine
the report shows how much CPU the broker leaves, and what each part of jetrabbitmq's
pipeline costs beside it.

    .venv/bin/python bench/bench_jetrabbitmq.py [--messages 100000] [--body-bytes 200]

Writes bench/reports/jetrabbitmq.json and prints the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import pika

REPORTS = Path(__file__).resolve().parent / "reports"


def amqp_url() -> str:
    url = os.environ.get("JETSPARK_AMQP_URL")
    if url:
        return url
    from jetspark.devtools.services import local

    return local.status()["rabbitmq"].endpoint


def _processes() -> dict[int, str]:
    """pid → command line of every process now."""
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                out[int(pid)] = f.read().decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError):
            pass
    return out


def _kind(pid: int, cmdline: str) -> str | None:
    if pid == os.getpid():
        return "bench"
    if "beam.smp" in cmdline:
        return "broker"
    if "pyspark.daemon" in cmdline or "pyspark.worker" in cmdline:
        return "python_workers"
    if "java" in cmdline and "SparkSubmit" in cmdline:
        return "spark_jvm"
    return None


def cpu_now() -> dict[str, float]:
    """CPU seconds so far, by who spent them: the broker, Spark's JVM, the driver-side
    Python source runner (a child process of the JVM per query; its CPU is counted once it
    exits, as the JVM's reaped children), the executors' Python workers, this process (the
    pika consumer) and the whole machine (``busy``: all but idle and iowait)."""
    tck = os.sysconf("SC_CLK_TCK")
    out = dict.fromkeys(("broker", "spark_jvm", "source_runner", "python_workers", "bench", "busy"), 0.0)
    for pid, cmdline in _processes().items():
        kind = _kind(pid, cmdline)
        if kind is None:
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                utime, stime, cutime, cstime = map(int, f.read().rsplit(")", 1)[1].split()[11:15])
        except (FileNotFoundError, ProcessLookupError):
            continue
        out[kind] += (utime + stime) / tck
        if kind == "spark_jvm":
            out["source_runner"] += (cutime + cstime) / tck
    with open("/proc/stat") as f:
        ticks = list(map(int, f.readline().split()[1:]))
    out["busy"] = (sum(ticks) - ticks[3] - ticks[4]) / tck
    return out


def _jvm_children() -> list[int]:
    """Child processes of Spark's JVM other than the Python daemons and Java's spawn helper."""
    processes = _processes()
    children: list[int] = []
    for pid, cmdline in processes.items():
        if _kind(pid, cmdline) != "spark_jvm":
            continue
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    children += map(int, f.read().split())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return [c for c in children if c in processes and _kind(c, processes[c]) is None
            and "jspawnhelper" not in processes[c]]


def wait_source_runner_exit(timeout_s: float = 10.0) -> None:
    """Until the stopped query's source runner has exited and been reaped (it ends after
    ``awaitTermination`` returns), so its CPU time is counted."""
    deadline = time.monotonic() + timeout_s
    while _jvm_children() and time.monotonic() < deadline:
        time.sleep(0.05)


def fill(url: str, queue: str, n: int, body_bytes: int) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.queue_declare(queue, durable=True)
    ch.queue_purge(queue)
    pad = b"x" * max(0, body_bytes - 16)
    props = [pika.BasicProperties(message_id=f"{i:012d}", delivery_mode=2,
                                  timestamp=1_700_000_000 + i // 1000) for i in range(n)]
    for i in range(n):
        ch.basic_publish("", queue, b"%012d" % i + pad, props[i])
    deadline = time.monotonic() + 120
    while ch.queue_declare(queue, passive=True).method.message_count < n:
        if time.monotonic() > deadline:
            raise RuntimeError("publishing did not complete")
        time.sleep(0.1)
    conn.close()


def plain_pika(url: str, queue: str, n: int, prefetch: int) -> float:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.basic_qos(prefetch_count=prefetch)
    got = 0
    last_tag = 0
    step = max(1, prefetch // 2)

    def on_message(channel, method, _props, _body) -> None:
        nonlocal got, last_tag
        got += 1
        last_tag = method.delivery_tag
        if got % step == 0 or got == n:
            channel.basic_ack(method.delivery_tag, multiple=True)

    t0 = time.perf_counter()
    ch.basic_consume(queue, on_message, auto_ack=False)
    while got < n:
        conn.process_data_events(time_limit=1)
    elapsed = time.perf_counter() - t0
    conn.close()
    return elapsed


def jetrabbitmq(
    spark, url: str, queue: str, n: int, prefetch: int, max_per_trigger: int
) -> tuple[float, int]:
    work = tempfile.mkdtemp(prefix="bench-jetrabbitmq-")
    stream = (spark.readStream.format("jetrabbitmq").option("url", url).option("queue", queue)
              .option("walLocation", f"{work}/wal").option("prefetch", str(prefetch))
              .option("maxMessagesPerTrigger", str(max_per_trigger)).load())
    t0 = time.perf_counter()
    query = (stream.writeStream.format("noop").option("checkpointLocation", f"{work}/cp")
             .trigger(availableNow=True).start())
    query.awaitTermination()
    elapsed = time.perf_counter() - t0
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    if rows != n:
        raise RuntimeError(f"jetrabbitmq read {rows} rows, expected {n}: {query.recentProgress}")
    progress = query.recentProgress
    for p in progress:
        print("batch", p["batchId"], p["numInputRows"], p["durationMs"])
    later = [p for p in progress if p["batchId"] > 0 and p["numInputRows"]]
    steady_rows = sum(p["numInputRows"] for p in later)
    steady_ms = sum(p["durationMs"]["triggerExecution"] for p in later)
    steady = steady_rows * 1000 / steady_ms if steady_ms else float("nan")
    return elapsed, len(progress), steady


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--body-bytes", type=int, default=200)
    ap.add_argument("--prefetch", type=int, default=40_000)
    ap.add_argument("--max-per-trigger", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=3, help="alternating runs of each (median)")
    args = ap.parse_args()
    url = amqp_url()
    queue = f"bench_{uuid.uuid4().hex[:8]}"
    from jetspark.datasources.rabbitmq.source import RabbitMQDataSource
    from jetspark.devtools.spark import local_session

    spark = local_session("bench-jetrabbitmq")
    spark.dataSource.register(RabbitMQDataSource)
    pika_s: list[float] = []
    jet_s: list[float] = []
    steady_rates: list[float] = []
    cpu: dict[str, list[dict[str, float]]] = {"pika": [], "jetrabbitmq": []}
    try:
        for i in range(args.repeat):  # alternate which goes first
            for who in ("pika", "jetrabbitmq") if i % 2 == 0 else ("jetrabbitmq", "pika"):
                fill(url, queue, args.messages, args.body_bytes)
                before = cpu_now()
                if who == "pika":
                    pika_s.append(plain_pika(url, queue, args.messages, args.prefetch))
                else:
                    t_jet, batches, steady = jetrabbitmq(
                        spark, url, queue, args.messages, args.prefetch, args.max_per_trigger
                    )
                    jet_s.append(t_jet)
                    steady_rates.append(steady)
                wait_source_runner_exit()
                after = cpu_now()
                cpu[who].append({k: round(after[k] - before[k], 2) for k in after})
                print(f"run {i + 1} {who}: pika {pika_s[-1:]} s, jetrabbitmq {jet_s[-1:]} s, "
                      f"steady {steady_rates[-1:]} msg/s", flush=True)
    finally:
        conn = pika.BlockingConnection(pika.URLParameters(url))
        conn.channel().queue_delete(queue)
        conn.close()
    t_pika, t_jet, steady = (statistics.median(x) for x in (pika_s, jet_s, steady_rates))
    cpu_median = {who: {k: round(statistics.median(r[k] for r in runs), 2) for k in runs[0]}
                  for who, runs in cpu.items()}
    report = {
        "messages": args.messages, "body_bytes": args.body_bytes, "prefetch": args.prefetch,
        "max_per_trigger": args.max_per_trigger, "batches": batches, "repeat": args.repeat,
        "pika_manual_ack_msgs_per_s": round(args.messages / t_pika),
        "jetrabbitmq_noop_msgs_per_s": round(args.messages / t_jet),
        "jetrabbitmq_steady_msgs_per_s": round(steady),
        "pika_s": round(t_pika, 3), "jetrabbitmq_s": round(t_jet, 3),
        "ratio_jetrabbitmq_to_pika": round(t_pika / t_jet, 3),
        "ratio_steady_to_pika": round(steady * t_pika / args.messages, 3),
        "runs": {"pika_s": pika_s, "jetrabbitmq_s": jet_s, "jetrabbitmq_steady_msgs_per_s": steady_rates,
                 "cpu_s": cpu},
        "cpu": cpu_median, "cores": os.cpu_count(),
        "load_average": os.getloadavg(),
    }
    REPORTS.mkdir(exist_ok=True)
    (REPORTS / "jetrabbitmq.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    print(f"median of {args.repeat} alternating runs: jetrabbitmq reaches "
          f"{report['ratio_jetrabbitmq_to_pika']:.0%} of the plain pika consumer "
          f"({report['jetrabbitmq_noop_msgs_per_s']} vs {report['pika_manual_ack_msgs_per_s']} msg/s, "
          f"query start included); after the first batch {report['ratio_steady_to_pika']:.0%} "
          f"({report['jetrabbitmq_steady_msgs_per_s']} msg/s); load average "
          + " ".join(f"{x:.2f}" for x in report["load_average"]))
    for who, c in cpu_median.items():
        wall = t_pika if who == "pika" else t_jet
        print(f"CPU seconds during {who}'s run (median): broker {c['broker']:.2f}, Spark JVM "
              f"{c['spark_jvm']:.2f}, source runner {c['source_runner']:.2f}, Python workers "
              f"{c['python_workers']:.2f}, this process {c['bench']:.2f}; machine busy {c['busy']:.2f} "
              f"of {wall * os.cpu_count():.2f} ({os.cpu_count()} cores × {wall:.2f} s)")
    spark.stop()


if __name__ == "__main__":
    main()
