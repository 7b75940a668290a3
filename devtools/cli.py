"""The ``jetspark`` console command: local services, the demo pipeline, inspecting a query."""

from __future__ import annotations

import argparse
import sys

from jetspark.errors import JetsparkError


def _services(args: argparse.Namespace) -> int:
    from jetspark.devtools.services import local
    from jetspark.devtools.services.endpoints import SERVICES
    from jetspark.devtools.services.exports import shown

    names = args.names or None
    if args.action == "fetch":
        fetched = {"kafka", "registry"}  # the others run from installed packages
        if not set(names or ()) <= fetched:
            raise JetsparkError(f"services fetch: only kafka and registry are downloaded, not "
                                f"{', '.join(sorted(set(names) - fetched))}")
        if "kafka" in (names or ["kafka"]):
            from jetspark.devtools.services.kafka import libs_dir, tools_jar

            print(f"kafka jars: {libs_dir()}")
            print(f"kafka tools jar: {tools_jar()}")
        if "registry" in (names or ()):
            from jetspark.devtools.services.schema_registry import app_dir, native_transport

            print(f"schema registry (Apicurio Registry): {app_dir()}")
            print(f"its Unix socket transport (Netty epoll): {', '.join(map(str, native_transport()))}")
    elif args.action == "up":
        _endpoints, started = local.up(names)
        chosen = names or SERVICES
        reused = [n for n in chosen if n not in started]
        print(f"started: {', '.join(started) or '-'}; already running: {', '.join(reused) or '-'}")
        _print_env({n: rec for n, rec in local.status().items() if n in chosen})
    elif args.action == "env":
        _print_env({n: rec for n, rec in local.status().items() if rec.alive() and (not names or n in names)})
    elif args.action == "status":
        for name, rec in local.status().items():
            pids = ",".join(str(p.pid) for p in rec.processes)
            state = "running" if rec.alive() else "DEAD"
            print(f"{name:9} {state:8} pids={pids} endpoint={shown(rec.endpoint)} data={rec.data_dir}")
    elif args.action == "down":
        stopped = local.down(names)
        print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
    elif args.action == "restart":
        if not names:
            raise JetsparkError("services restart: name the service(s) to restart "
                                "(kafka, postgres, rabbitmq, spark or registry)")
        for name in names:
            rec = local.restart(name)
            print(f"restarted {name}: {shown(rec.endpoint)}")
    return 0


def _print_env(records) -> None:
    """The ``export`` lines of ``records``' endpoints, no password in them (:mod:`.exports`)."""
    from jetspark.devtools.services.exports import export_lines

    for line in export_lines(records):
        print(line)


def _demo(args: argparse.Namespace) -> int:
    from jetspark.devtools.demo.pipeline import run_demo

    return run_demo(args)


def _inspect(args: argparse.Namespace) -> int:
    import json
    import time

    from jetspark.inspect import credentials
    from jetspark.inspect.report import inspect

    creds = credentials.load(pg_password_file=args.pg_password_file,
                             amqp_password_file=args.amqp_password_file,
                             kafka_config_file=args.kafka_config)
    pg_instead = f"{credentials.PG_PASSWORD_ENV}, PGPASSWORD, ~/.pgpass or --pg-password-file"
    amqp_instead = f"{credentials.AMQP_PASSWORD_ENV} or --amqp-password-file"
    for option, url, instead in (("--pg", args.pg, pg_instead), ("--amqp", args.amqp, amqp_instead),
                                 ("--rabbitmq-api", args.rabbitmq_api, amqp_instead)):
        if url and credentials.url_has_password(url):
            print(f"jetspark: warning: {option} carries a password, which other local users can read in "
                  f"the process list and which stays in the shell's history; use {instead}",
                  file=sys.stderr)

    def once() -> int:
        report = inspect(args.checkpoint, last=args.batches, kafka=args.kafka, pg=args.pg,
                         sink_id=args.sink_id, amqp=args.amqp, queue=args.queue,
                         rabbitmq_api=args.rabbitmq_api, wal_location=args.wal_location,
                         credentials=creds)
        print(json.dumps(report.to_json()) if args.json else report.text(), flush=True)
        if args.plot:
            try:
                report.plot(args.plot)
            except OSError as e:
                raise JetsparkError(
                    f"--plot {args.plot}: cannot write the picture ({e.strerror or e})") from None
        return 1 if report.errors else 0

    if args.follow is None:
        return once()
    rounds = 0
    try:
        while True:
            if not args.json and rounds:
                print(f"\n--- {time.strftime('%H:%M:%S')} (every {args.follow:g} s; Ctrl-C ends)", flush=True)
            once()
            rounds += 1
            if args.rounds is not None and rounds >= args.rounds:
                return 0
            time.sleep(args.follow)
    except KeyboardInterrupt:
        return 0


def version_text() -> str:
    """``jetspark --version``: jetspark's version (pyproject.toml's, as installed), PySpark's, Python's."""
    from importlib.metadata import PackageNotFoundError, version

    import jetspark

    try:
        pyspark = version("pyspark")
    except PackageNotFoundError:
        pyspark = "not installed"
    return f"jetspark {jetspark.__version__} (PySpark {pyspark}, Python {sys.version.split()[0]})"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jetspark", description=__doc__)
    parser.add_argument("--version", action="version", version=version_text())
    sub = parser.add_subparsers(dest="command", required=True)

    svc = sub.add_parser("services", help="local Kafka, PostgreSQL and RabbitMQ (and on request a Spark "
                                          "cluster and a Schema Registry) on 127.0.0.1")
    svc.add_argument("action", choices=["up", "env", "status", "down", "restart", "fetch"])
    svc.add_argument("names", nargs="*", metavar="NAME",
                     help="kafka, postgres, rabbitmq, spark and/or registry (default: the first "
                          "three; fetch: kafka, or the ones named of kafka and registry; restart "
                          "needs a name)")
    svc.set_defaults(func=_services)

    demo = sub.add_parser("demo", help="run the demo pipeline on real services")
    demo.add_argument("--records", type=int, default=20_000, help="events to produce")
    demo.add_argument("--partitions", type=int, default=4, help="Kafka topic partitions")
    demo.add_argument("--duration", type=int, default=120, help="seconds of event time the stream spans")
    demo.add_argument("--rate", type=int, default=None,
                      help="events per second of event time (overrides --records: rate x duration)")
    demo.add_argument("--batches", type=int, default=10, help="about how many micro-batches to read in")
    demo.add_argument("--report-dir", default=None, help="report folder (default reports/demo-<timestamp>)")
    demo.add_argument("--pg-schema", default=None, help="PostgreSQL schema of the demo's tables")
    demo.add_argument("--external", action="store_true",
                      help="use the services named by JETSPARK_* variables, start none")
    demo.add_argument("--keep-services", action="store_true",
                      help="leave the local services running afterwards")
    demo.add_argument("--master", default=None,
                      help="Spark master, e.g. spark://127.0.0.1:7077 (default: local[2]; under "
                           "spark-submit, the master given to spark-submit)")
    demo.add_argument("--start-ms", type=int, default=None,
                      help="event time of the stream's start, epoch ms (default: the stream ends about "
                           "now); runs with the same value and options produce the same events")
    demo.set_defaults(func=_demo)

    ins = sub.add_parser("inspect", help="a streaming query's batches, watermarks, lag and pending "
                                         "transactions, from its checkpoint (read-only)")
    ins.add_argument("checkpoint", help="the query's checkpointLocation: a local folder or a URI (s3://, "
                                        "s3a://, gs://, hdfs://, abfs://, file://); credentials as the "
                                        "filesystem takes them (AWS_* variables, …)")
    ins.add_argument("--batches", type=int, default=20, help="show the newest N batches (0: all; default 20)")
    ins.add_argument("--kafka", metavar="BOOTSTRAP", help="Kafka bootstrap servers: each partition's lag")
    ins.add_argument("--kafka-config", metavar="FILE",
                     help="librdkafka settings, key=value lines (security.protocol, sasl.*, ssl.*, "
                          "bootstrap.servers), for a secured cluster")
    ins.add_argument("--pg", metavar="URL",
                     help="jetjdbc's url: the sink's prepared transactions and their age "
                          "(password: JETSPARK_PG_PASSWORD, PGPASSWORD, ~/.pgpass or --pg-password-file)")
    ins.add_argument("--pg-password-file", metavar="FILE",
                     help="the PostgreSQL password: the file's first line")
    ins.add_argument("--sink-id", help="jetjdbc sinkId (default: the query id, as jetjdbc's default)")
    ins.add_argument("--amqp", metavar="URL",
                     help="RabbitMQ URL (with --queue): ready messages, consumers "
                          "(password: JETSPARK_AMQP_PASSWORD or --amqp-password-file)")
    ins.add_argument("--amqp-password-file", metavar="FILE",
                     help="the RabbitMQ password (also the management API's): the file's first line")
    ins.add_argument("--queue", help="the jetrabbitmq queue")
    ins.add_argument("--rabbitmq-api", metavar="URL",
                     help="management plugin URL (http://user@host:15672) for the unacked count")
    ins.add_argument("--wal-location", metavar="PATH",
                     help="jetrabbitmq walLocation (a local folder or a URI): WAL, dedup and lease files")
    ins.add_argument("--json", action="store_true", help="one JSON object per report")
    ins.add_argument("--plot", metavar="FILE.png", help="also draw the per-partition watermarks and W")
    ins.add_argument("--follow", type=float, metavar="SECONDS", nargs="?", const=5.0, default=None,
                     help="report again every SECONDS (default 5) until Ctrl-C")
    ins.add_argument("--rounds", type=int, default=None, help="with --follow: stop after N reports")
    ins.set_defaults(func=_inspect)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except JetsparkError as e:
        print(f"jetspark: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
