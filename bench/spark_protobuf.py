"""Spark's spark-protobuf connector (``from_protobuf``) for ``bench_protobuf.py``.

The jar comes from Maven when the repository at hand serves it; otherwise from a jar built
beforehand from Spark's sources (``connector/protobuf``) and put at
``JETSPARK_SPARK_PROTOBUF_JAR`` or ``<jetspark cache>/spark-protobuf-4.2.0/spark-protobuf_2.13.jar``
(a ``SOURCE`` file beside it says what it was built from). Nothing here builds it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

SPARK_PROTOBUF = "org.apache.spark:spark-protobuf_2.13:4.2.0"


def local_jar() -> Path:
    """Where a locally built spark-protobuf jar is looked for."""
    from jetspark.devtools.services.registry import cache_dir

    named = os.environ.get("JETSPARK_SPARK_PROTOBUF_JAR")
    return Path(named) if named else cache_dir() / "spark-protobuf-4.2.0" / "spark-protobuf_2.13.jar"


def jars_conf(spark_kafka: Iterable[str]) -> tuple[dict[str, str], str]:
    """``spark.jars`` with spark-sql-kafka and spark-protobuf, and which spark-protobuf it is;
    raises JetsparkError (the reasons for Maven and the local jar) when there is none."""
    from jetspark.devtools.maven import spark_jars_conf
    from jetspark.errors import JetsparkError

    kafka = list(spark_kafka)
    try:
        return spark_jars_conf([*kafka, SPARK_PROTOBUF]), f"{SPARK_PROTOBUF} from Maven"
    except JetsparkError as e:
        lines = str(e).splitlines()
        maven = next((line for line in lines if "Could not" in line), lines[0])
        maven = re.sub(r"\x1b\[[0-9;]*m", "", maven).strip()[:300]
    jar = local_jar()
    if not jar.is_file():
        raise JetsparkError(f"Maven: {maven}; and no spark-protobuf jar built at {jar} "
                            "(JETSPARK_SPARK_PROTOBUF_JAR names another)")
    conf = spark_jars_conf(kafka)
    conf["spark.jars"] = ",".join(p for p in [conf.get("spark.jars", ""), str(jar)] if p)
    source = jar.with_name("SOURCE")
    built = source.read_text().splitlines()[0] if source.is_file() else "sources not recorded"
    return conf, f"{jar} (built locally; {built})"
