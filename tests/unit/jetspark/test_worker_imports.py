"""Each kind of Python process a query starts imports only what it uses: the module its
pickled objects bring in (a format's ``pyspark_*`` module for the driver's planner and commit
runners, a window stage's module for a state worker or stage 1) leaves the modules it has no
use for unimported. A behaviour test (what is in ``sys.modules`` after a fresh interpreter
imports the module), not a timing one; ``bench/import_profile.py`` measures the times."""

from __future__ import annotations

import subprocess
import sys

import pytest

#: The query-building side of windowing: a worker that runs a window stage has no use for it.
API = ("jetspark.windowing.api", "jetspark.windowing.native", "jetspark.windowing.inputs",
       "jetspark.warm_workers")

#: Typed values' decoders: a planner or reader of bytes has no use for them.
DECODERS = ("jetspark.schemas.avro_program", "jetspark.schemas.protobuf_program",
            "jetspark.schemas.protobuf_types", "jetspark.schemas.json_schema_types", "google.protobuf")

CASES = {
    # the data sources' planners, readers and the sink's commit runner: no pandas, no windowing
    "pyspark_jetkafka": ("pandas", "jetspark.windowing", "jetspark.sinks.kafka.writer", *DECODERS),
    "pyspark_jetkafkashare": ("pandas", "jetspark.windowing", *DECODERS),
    "pyspark_jetrabbitmq": ("pandas", "jetspark.windowing"),
    # jetjdbc's commit runner (a Python process on the driver) only commits: no pyarrow, no numpy
    "pyspark_jetjdbc": ("pandas", "jetspark.windowing", "pyarrow", "numpy"),
    "jetspark.datasources.kafka.source": ("pandas", "jetspark.windowing", *DECODERS),
    "jetspark.datasources.rabbitmq.source": ("pandas", "jetspark.windowing"),
    "jetspark.sinks.jdbc.writer": ("pandas", "jetspark.windowing"),
    # a window's state worker and stage 1 (their plans pickle ops' operations): the stages only
    "jetspark.windowing.stateful": ("pandas", *API),
    "jetspark.windowing.accumulate_by_frame": ("pandas", *API),
    "jetspark.windowing.ops": ("pandas", *API),
    # the warm-up job's function imports what the query's workers will, itself nothing heavy
    "jetspark.warm_workers": ("pandas", "pyarrow", "numpy", "jetspark.windowing"),
}


@pytest.mark.parametrize("module", sorted(CASES))
def test_a_worker_kinds_entry_module_imports_only_what_the_kind_uses(module: str) -> None:
    code = (f"import sys, {module}\n"
            f"loaded = sorted(m for m in {CASES[module]!r} if m in sys.modules)\n"
            "print(','.join(loaded))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"importing {module} also imports {done.stdout.strip()}"


def test_the_public_windowing_names_still_import_from_the_package() -> None:
    code = ("from jetspark.windowing import ops, tumbling, window_aggregate, StatefulPartitionsWarning\n"
            "import jetspark.windowing as w, jetspark\n"
            "assert w.ops is ops and w.tumbling is tumbling\n"
            "assert jetspark.window_aggregate is window_aggregate\n"
            "assert all(getattr(w, n) is not None for n in w.__all__)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
