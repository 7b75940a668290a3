"""``bench_start.py --attribute``'s hook: every Python process of the run writes what it does.

Python imports ``sitecustomize`` at start-up from ``PYTHONPATH``; ``bench_start.py`` puts this
directory there and ``JETSPARK_START_TRACE`` (a file) in the environment of its driver, whose
Spark passes both to every Python process it starts (the daemon and the workers it forks, the
planner and commit runners). With the variable unset this module does nothing.

Each process appends JSON lines to the file (one ``os.write`` each, so processes do not mix
lines): ``process`` (pid, parent, command line, when the kernel started it and when this hook
ran, i.e. after the interpreter's own start-up), ``fork`` (a worker forked by the daemon),
``connected`` (a runner connected back to the JVM: Spark's 10 s limit for a worker started
outside the daemon ends there), ``import`` (a top-level import of 2 ms or more: its time, like
``-X importtime``'s cumulative figure, and its split by group of modules, each module's own
time), ``task`` (a forked worker's task: its Spark stage, partition, job group and micro-batch,
the function it runs and the classes it holds, when it began and ended, the time spent
unpickling the function, i.e. importing what it needs, and all imports during it).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

_PATH = os.environ.get("JETSPARK_START_TRACE")
_MIN_IMPORT_S = 0.002
_CONNECTED: list[float] = []
_GROUPS = ("jetspark.windowing", "jetspark.datasources", "jetspark.sinks", "jetspark.schemas", "jetspark",
           "pyspark_jet", "pyspark.sql.pandas", "pyspark.sql", "pyspark", "pandas", "pyarrow", "numpy",
           "confluent_kafka", "psycopg", "pika", "google.protobuf", "py4j")


def _emit(event: str, **fields) -> None:
    line = json.dumps({"ev": event, "pid": os.getpid(), "t": time.time(), **fields}, default=str) + "\n"
    fd = os.open(_PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _group(module: str) -> str:
    return next((g for g in _GROUPS if module == g or module.startswith(g + ".")
                 or (g == "pyspark_jet" and module.startswith(g))), "other")


def _started_at() -> float:
    """When the kernel started this process (epoch seconds; 10 ms resolution)."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as f:
        boot = next(int(ln.split()[1]) for ln in f if ln.startswith("btime"))
    return boot + ticks / os.sysconf("SC_CLK_TCK")


class _Imports:
    """Times imports as ``-X importtime`` does, by wrapping importlib's ``_find_and_load``
    (the import statement calls it through the module's attribute on every import)."""

    def __init__(self) -> None:
        import importlib._bootstrap as bootstrap

        self.local = threading.local()  # per thread: the imports running, [module, start, children's time],
        # and the running top-level import's own time per group
        self.total_s = 0.0  # every top-level import's time in this process
        self.original = bootstrap._find_and_load
        bootstrap._find_and_load = self.find_and_load

    def find_and_load(self, name, import_):
        local = self.local
        if not getattr(local, "stack", None):
            local.stack, local.parts = [], {}
        stack, frame = local.stack, [name, time.perf_counter(), 0.0]
        stack.append(frame)
        try:
            return self.original(name, import_)
        finally:
            stack.pop()
            spent = time.perf_counter() - frame[1]
            g = _group(name)
            local.parts[g] = local.parts.get(g, 0.0) + spent - frame[2]
            if stack:
                stack[-1][2] += spent
            else:
                self.total_s += spent
                if spent >= _MIN_IMPORT_S:
                    _emit("import", module=name, ms=spent * 1000,
                          parts={k: round(v * 1000, 1) for k, v in local.parts.items() if v >= 0.001})
            _patch(name)


def _describe(f) -> list[str]:
    """The function a task runs and the jetspark/format classes it holds (one level deep)."""
    seen = [f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', type(f).__qualname__)}"]
    cells = [c.cell_contents for c in (getattr(f, "__closure__", None) or ()) if c.cell_contents is not None]
    for v in [*cells, *getattr(f, "__dict__", {}).values(), f]:
        cls = type(v)
        if cls.__module__.startswith(("jetspark", "pyspark_jet")):
            seen.append(f"{cls.__module__}.{cls.__qualname__}")
        elif callable(v) and getattr(v, "__module__", "") and v.__module__.startswith("jetspark"):
            seen.append(f"{v.__module__}.{getattr(v, '__qualname__', '?')}")
    return sorted(set(seen), key=seen.index)


def _patch(name: str) -> None:
    if name == "pyspark.worker":
        _patch_worker(sys.modules[name])
    elif name == "pyspark.util":
        _patch_connect(sys.modules[name])


def _patch_connect(util) -> None:
    original = getattr(util, "local_connect_and_auth", None)
    if original is None or getattr(original, "_traced", False):
        return

    def local_connect_and_auth(*args, **kwargs):
        out = original(*args, **kwargs)
        if not _CONNECTED:  # the first: a runner connecting back (the driver connects to fetch results)
            _CONNECTED.append(time.time())
            _emit("connected")
        return out

    local_connect_and_auth._traced = True
    util.local_connect_and_auth = local_connect_and_auth


def _patch_worker(worker) -> None:
    if getattr(worker.main, "_traced", False):
        return
    main, read_udfs, read_command = worker.main, worker.read_udfs, worker.read_command
    task: dict = {}

    def traced_read_command(*args, **kwargs):
        out = original_read_command(*args, **kwargs)
        f = out[0] if isinstance(out, tuple) else out
        task.setdefault("functions", []).extend(_describe(f))
        return out

    original_read_command = read_command

    def traced_read_udfs(pickle_ser, udf_info, eval_type, *rest):
        t0 = time.perf_counter()
        try:
            return read_udfs(pickle_ser, udf_info, eval_type, *rest)
        finally:
            task["eval_type"] = eval_type
            task["unpickle_ms"] = (time.perf_counter() - t0) * 1000

    def traced_main(infile, outfile):
        task.clear()
        began, imported = time.time(), _IMPORTS.total_s
        try:
            return main(infile, outfile)
        finally:
            from pyspark.taskcontext import TaskContext

            tc = TaskContext.get()
            where = {} if tc is None else {
                "stage": tc.stageId(), "partition": tc.partitionId(),
                "job_group": tc.getLocalProperty("spark.jobGroup.id"),
                "batch": tc.getLocalProperty("streaming.sql.batchId")}
            _emit("task", began=began, import_ms=(_IMPORTS.total_s - imported) * 1000, **where, **task)

    traced_main._traced = True
    worker.main, worker.read_udfs, worker.read_command = traced_main, traced_read_udfs, traced_read_command


if _PATH:
    _IMPORTS = _Imports()
    with open("/proc/self/cmdline", "rb") as _f:
        _CMD = [a.decode(errors="replace") for a in _f.read().split(b"\0") if a]
    _emit("process", ppid=os.getppid(), cmd=_CMD, started=_started_at())
    os.register_at_fork(after_in_child=lambda: _emit("fork", ppid=os.getppid()))
