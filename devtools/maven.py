"""Fetch JVM packages from Maven Central for Spark sessions (``spark.jars``).

Spark's own ``spark.jars.packages`` resolves with Ivy, which cannot reach the package
registry here (only Maven is configured for it). So we resolve with Maven into a cached
folder and hand Spark the jar paths, minus the jars Spark already ships.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from jetspark.devtools.services.registry import cache_dir
from jetspark.errors import JetsparkError

# Spark's built-in Kafka connector. 4.3.0 is not in the registry reachable here; 4.2.0 is
# the newest that runs streaming queries on Spark 4.3 (4.0.x fails with NoSuchMethodError),
# but its spark-token-provider 4.2.0 is missing there, so 4.0.0's (unchanged API) is used.
# A coordinate may carry exclusions: "group:artifact:version!group:artifact!...".
SPARK_KAFKA = (
    "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0"
    "!org.apache.spark:spark-token-provider-kafka-0-10_2.13",
    "org.apache.spark:spark-token-provider-kafka-0-10_2.13:4.0.0",
)
# Spark's Avro functions (from_avro) for the differential tests: 4.3.0 is not served here
# either; 4.2.0 is the newest, and its from_avro runs on Spark 4.3.
SPARK_AVRO = ("org.apache.spark:spark-avro_2.13:4.2.0",)
POSTGRES_JDBC = ("org.postgresql:postgresql:42.7.4",)

_VERSIONED_JAR = re.compile(r"^(?P<name>.+?)-\d[\w.\-]*\.jar$")


def _pom(coordinates: list[str]) -> str:
    deps = []
    for coord in coordinates:
        main, *excluded = coord.split("!")
        group, artifact, version = main.split(":")
        exclusions = "".join(
            "<exclusion><groupId>{}</groupId><artifactId>{}</artifactId></exclusion>".format(
                *e.split(":")
            )
            for e in excluded
        )
        deps.append(
            f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version><exclusions>{exclusions}</exclusions></dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>io.jetspark</groupId><artifactId>spark-extra-jars</artifactId><version>1</version>"
        f"<packaging>pom</packaging><dependencies>{''.join(deps)}</dependencies></project>"
    )


def _spark_jar_names() -> set[str]:
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    return {m["name"] for p in jars.glob("*.jar") if (m := _VERSIONED_JAR.match(p.name))}


def resolve_jars(coordinates: Iterable[str]) -> list[Path]:
    """Jar files of ``coordinates`` and their dependencies that Spark does not ship."""
    coords = sorted(coordinates)
    key = hashlib.sha1("\n".join(coords).encode()).hexdigest()[:12]
    folder = cache_dir() / "jars" / key
    if not (folder / ".complete").exists():
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "pom.xml").write_text(_pom(coords))
        copy_dependencies(folder / "pom.xml", folder / "lib", ", ".join(coords))
        (folder / ".complete").touch()
    shipped = _spark_jar_names()
    return sorted(
        p for p in (folder / "lib").glob("*.jar")
        if not ((m := _VERSIONED_JAR.match(p.name)) and m["name"] in shipped)
    )


def copy_dependencies(pom: Path, output: Path, what: str, *, transitive: bool = True) -> None:
    """Resolve ``pom``'s runtime dependencies into ``output`` with Maven, all or nothing
    (``transitive=False``: only the ones the pom names)."""
    _maven_into(output, what, lambda partial: [
        "-f", str(pom), "dependency:copy-dependencies", "-DincludeScope=runtime",
        f"-DoutputDirectory={partial}", *([] if transitive else ["-DexcludeTransitive=true"])])


def copy_artifact(coordinate: str, output: Path, what: str) -> None:
    """Copy the one artifact ``coordinate`` (``group:artifact:version[:type[:classifier]]``)
    into ``output`` with Maven, all or nothing, without reading its dependencies: for a packaged
    application, whose POM may name a parent POM that Maven Central does not serve."""
    with tempfile.TemporaryDirectory() as neutral:  # no pom.xml: Maven runs outside a project
        _maven_into(output, what, lambda partial: [
            "dependency:copy", f"-Dartifact={coordinate}", f"-DoutputDirectory={partial}"],
            cwd=Path(neutral))


def _maven_into(output: Path, what: str, arguments: Callable[[Path], list[str]], *,
                cwd: Path | None = None) -> None:
    """Run Maven with ``arguments(folder)`` writing into a fresh folder, then make it ``output``."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JetsparkError(f"cannot fetch {what}: Maven ('mvn') is not installed")
    partial = output.with_name(output.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    proc = subprocess.run([mvn, "-q", "-B", *arguments(partial)], capture_output=True, text=True,
                          check=False, cwd=cwd)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
        raise JetsparkError(f"fetching {what} with Maven failed:\n{tail}")
    shutil.rmtree(output, ignore_errors=True)
    partial.rename(output)


def spark_jars_conf(coordinates: Iterable[str]) -> dict[str, str]:
    """Spark conf that puts ``coordinates`` on the classpath (``spark.jars``)."""
    return {"spark.jars": ",".join(str(p) for p in resolve_jars(coordinates))}
