"""What each kind of Python process a window query starts imports, and what it costs.

Per kind (the data source planner on the driver, the reader and writer in an executor, the
sink's commit runner, the state worker, stage 1, …): the module PySpark's own runner for
that kind imports (``base``, imported first and not counted) and the module the kind's
pickled objects bring in (``entry``: a class or function is unpickled by importing its
module). Each is run ``--runs`` times as ``python -X importtime -c 'import base; import
entry'`` in a fresh interpreter; the minimum over the runs is printed (``-X importtime``
measures wall time inside each import, so on a loaded machine the minimum is the least
disturbed figure: compare figures of one run of this script with each other, not days).

Per kind: the entry's total, the part of it in each group of modules (numpy, pyarrow,
pandas, pyspark.sql, jetspark.windowing, jetspark.schemas, confluent_kafka, …, counted where
time, without its imports', added to its group's), and which heavy modules it leaves loaded.

    .venv/bin/python bench/import_profile.py [--runs 5] [--kinds jetkafka-planner,window-state-worker]
        [--baseline DIR]   # DIR: another version laid out as installed, e.g. from `git archive`
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass

#: kind → (PySpark's runner module for that kind, what its pickled objects import)
KINDS: dict[str, tuple[str, str]] = {
    "jetkafka-planner": ("pyspark.sql.streaming.python_streaming_source_runner", "pyspark_jetkafka"),
    "jetkafka-reader": ("pyspark.worker, pyarrow", "jetspark.datasources.kafka.source"),
    "jetkafka-format": ("pyspark.worker, pyarrow", "pyspark_jetkafka"),
    "jetrabbitmq-planner": ("pyspark.sql.streaming.python_streaming_source_runner", "pyspark_jetrabbitmq"),
    "jetrabbitmq-reader": ("pyspark.worker, pyarrow", "jetspark.datasources.rabbitmq.source"),
    "jetjdbc-commit": ("pyspark.sql.worker.python_streaming_sink_runner", "pyspark_jetjdbc"),
    "jetjdbc-writer": ("pyspark.worker, pyarrow", "jetspark.sinks.jdbc.writer"),
    "window-stage1": ("pyspark.worker, pyarrow", "jetspark.windowing.accumulate_by_frame"),
    "window-state-worker": ("pyspark.worker, pyarrow, pandas", "jetspark.windowing.stateful"),
    "window-ops": ("pyspark.worker, pyarrow", "jetspark.windowing.ops"),
    "warm-up": ("pyspark.worker, pyarrow", "jetspark.warm_workers"),
    "driver-api": ("pyspark.sql", "jetspark.windowing"),
}
#: Groups of modules, longest prefix first.
GROUPS = ("jetspark.windowing.ops", "jetspark.windowing", "jetspark.datasources.kafka",
          "jetspark.datasources.rabbitmq", "jetspark.datasources", "jetspark.sinks.jdbc",
          "jetspark.sinks.kafka", "jetspark.sinks", "jetspark.schemas", "jetspark", "pyspark_jet",
          "pyspark.sql.pandas", "pyspark.sql.connect", "pyspark.sql", "pyspark", "pandas", "pyarrow",
          "numpy", "confluent_kafka", "psycopg", "pika", "google.protobuf", "py4j")
HEAVY = ("pandas", "numpy", "pyarrow", "pyarrow.compute", "pyspark.sql.connect", "jetspark.windowing",
         "jetspark.windowing.ops", "jetspark.windowing.api", "jetspark.sinks.kafka.writer",
         "jetspark.schemas.protobuf_program", "jetspark.schemas.avro_program", "confluent_kafka",
         "psycopg", "pika", "google.protobuf")


def group_of(module: str) -> str:
    for g in GROUPS:
        if module == g or module.startswith(g + ".") or (g.endswith("_jet") and module.startswith(g)):
            return g
    return "other"


@dataclass
class Profile:
    total_us: int
    groups: dict[str, int]
    loaded: list[str]


def parse(stderr: str, entry_marker: str) -> tuple[int, dict[str, int]]:
    """The import time (µs) of everything imported after ``entry_marker``'s line, and its
    split by group (each module's own time, without its imports', added to its group's)."""
    lines = [ln for ln in stderr.splitlines() if ln.startswith("import time:") and "|" in ln]
    start = max((i for i, ln in enumerate(lines) if ln.rstrip().endswith(entry_marker)), default=-1)
    total, groups = 0, defaultdict(int)
    for ln in lines[start + 1:]:
        self_s, cum_s, name = ln[len("import time:"):].split("|")
        if len(name) - len(name.lstrip(" ")) == 1:  # a top-level import: its time includes its imports'
            total += int(cum_s)
        groups[group_of(name.strip())] += int(self_s)
    return total, dict(groups)


def profile(base: str, entry: str, runs: int, trees: tuple[str | None, ...] = (None,)) -> list[Profile]:
    """Per tree (a directory put first on ``PYTHONPATH``, holding another version of the
    packages; None: the installed ones), the minimum over ``runs`` fresh interpreters of
    ``entry``'s imports after ``base``'s; the trees alternate run by run."""
    import os
    import tempfile

    marker = "_import_profile_marker"  # an empty module imported between the two: where the entry's begin
    code = (f"import {base}\nimport {marker}\nimport {entry}\nimport sys\n"
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    best: list[Profile | None] = [None] * len(trees)
    with tempfile.TemporaryDirectory() as tmp:
        open(os.path.join(tmp, f"{marker}.py"), "w").close()
        for _ in range(runs):
            for i, tree in enumerate(trees):
                path = os.pathsep.join(filter(None, [tree, tmp, os.environ.get("PYTHONPATH")]))
                out = subprocess.run([sys.executable, "-X", "importtime", "-c", code],
                                     env={**os.environ, "PYTHONPATH": path},
                                     capture_output=True, text=True, check=True)
                total, groups = parse(out.stderr, f" {marker}")
                if best[i] is None or total < best[i].total_us:
                    loaded = out.stdout.strip()
                    best[i] = Profile(total, groups, loaded.split(",") if loaded else [])
    return [b for b in best if b is not None]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--baseline", help="a directory holding another version of jetspark's packages "
                    "(jetspark/… and the pyspark_* modules, laid out as installed): measured alternately "
                    "with the installed one, both printed")
    args = ap.parse_args()
    import os

    trees = (None,) if not args.baseline else (args.baseline, None)
    names = ("now",) if not args.baseline else ("baseline", "now")
    for kind in args.kinds.split(","):
        base, entry = KINDS[kind]
        for name, p in zip(names, profile(base, entry, args.runs, trees), strict=True):
            parts = sorted(p.groups.items(), key=lambda kv: -kv[1])
            print(f"{kind:22s} {name:9s} {entry:40s} {p.total_us / 1000:7.0f} ms  after {base}")
            print(f"{'':32s} groups: " + ", ".join(f"{g} {us / 1000:.0f}" for g, us in parts if us >= 2000))
            print(f"{'':32s} loaded: {', '.join(p.loaded) or '-'}", flush=True)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (minimum of {args.runs} runs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
