"""Shorter Spark start-ups for the test run: a class-data-sharing archive for the driver JVM.

The fault tests start Spark in processes of their own, a few hundred times per run; on 2 cores
a driver JVM takes ~9 s to its session, most of it loading and verifying the same classes
each time. A JVM maps those classes from an archive instead (AppCDS, JDK 13+): one small Spark
run writes it (``-XX:ArchiveClassesAtExit``), every driver JVM of the run maps it
(``-XX:SharedArchiveFile``, through ``PYSPARK_SUBMIT_ARGS``, which the scripts inherit).

The query scripts' drivers also compile with the JIT's first tier only
(``-XX:TieredStopAtLevel=1``, :func:`quick_start`): they run a few small batches, where the
optimizing compiler's threads would only take the 2 cores from the start-up; the tests' shared
session keeps both tiers (its tests run longer, and ran 10 % slower with one).

Only speed, never behaviour: the archive is keyed by the Java and PySpark that will use it,
a JVM that finds it unusable loads its classes as before (``-Xshare:auto``), and when the
archive cannot be written the run goes on without it.

An archive's classes run in every test JVM, so its folder is private (0700, ours, reached
through no folder another user can change: :func:`jetspark.private_files.make_private_dir`)
and an archive that is not a regular file of ours, writable by us only, is not used.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pyarrow.fs as pafs

from jetspark.private_files import make_private_dir

_WRITER = """
from jetspark.devtools.spark import local_session
spark = local_session("jetspark-cds")
spark.range(1000).selectExpr("id % 7 AS k").groupBy("k").count().collect()
query = (spark.readStream.format("rate").load().writeStream.format("noop")
         .trigger(availableNow=True).option("checkpointLocation", {checkpoint!r}).start())
query.awaitTermination()
spark.stop()
"""


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else (shutil.which("java") or "java")


def _key() -> str:
    import pyspark

    version = subprocess.run([_java(), "-version"], capture_output=True, text=True, timeout=60).stderr
    jars = sorted(p.name for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar"))
    return hashlib.sha256("\n".join([version, pyspark.__version__, *jars]).encode()).hexdigest()[:16]


def archive(cache: Path | None = None) -> Path | None:
    """The archive for this Java and PySpark, written first when missing; ``None`` when it
    cannot be written (the reason goes to stderr)."""
    cache = cache or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "jetspark" / "cds"
    try:
        make_private_dir(pafs.LocalFileSystem(), str(cache))
        path = cache / f"spark-driver-{_key()}.jsa"
        if os.path.lexists(path):
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
                raise OSError(f"{path} is not a regular file of uid {os.getuid()} writable by it only; "
                              "remove it")
            return path
        partial = cache / f".{path.name}.{os.getpid()}"
        work = cache / f".work-{os.getpid()}"
        submit = f"--driver-java-options -XX:ArchiveClassesAtExit={partial} pyspark-shell"
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_SUBMIT_ARGS": submit}
        run = subprocess.run([sys.executable, "-c", _WRITER.format(checkpoint=str(work))], env=env,
                             capture_output=True, text=True, timeout=300)
        shutil.rmtree(work, ignore_errors=True)
        if run.returncode != 0 or not partial.exists():
            sys.stderr.write(f"jetspark tests: no class-data archive for Spark (rc={run.returncode}), "
                             f"driver JVMs start without one:\n{run.stderr[-2000:]}\n")
            partial.unlink(missing_ok=True)
            return None
        partial.replace(path)
        return path
    except (OSError, subprocess.SubprocessError) as e:  # UnsafeFolderError too
        sys.stderr.write(f"jetspark tests: no class-data archive for Spark ({e}), "
                         "driver JVMs start without one\n")
        return None


_ARCHIVE_OPTION = "-XX:SharedArchiveFile="


def use(path: Path) -> None:
    """Make the driver JVMs started from this process and its children map ``path``."""
    current = os.environ.get("PYSPARK_SUBMIT_ARGS", "pyspark-shell")
    if _ARCHIVE_OPTION not in current:
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"--driver-java-options {_ARCHIVE_OPTION}{path} {current}"


def quick_start(env: dict[str, str]) -> None:
    """In a query script's environment ``env``: its driver JVM, which maps the archive, also
    compiles with the first tier only. Without an archive in use, ``env`` is left as it is."""
    args = shlex.split(env.get("PYSPARK_SUBMIT_ARGS", ""))
    for i, arg in enumerate(args[:-1]):
        if arg == "--driver-java-options" and args[i + 1].startswith(_ARCHIVE_OPTION):
            args[i + 1] += " -XX:TieredStopAtLevel=1"
            env["PYSPARK_SUBMIT_ARGS"] = shlex.join(args)
            return
