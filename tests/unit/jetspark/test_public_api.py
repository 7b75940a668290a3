"""The public API: importable from ``jetspark`` (typed: the lazily loaded names are imported
under TYPE_CHECKING too), ``import jetspark`` stays light, and every public function documents
every parameter in numpydoc style."""

from __future__ import annotations

import ast
import inspect
import pydoc
import subprocess
import sys
from pathlib import Path

import pytest

import jetspark
import jetspark.datasources
import jetspark.windowing

ROOT = Path(__file__).resolve().parents[3]


def test_the_helpers_import_from_jetspark_and_import_jetspark_stays_light() -> None:
    code = (
        "import sys, jetspark\n"
        "heavy = sorted(m for m in ('pyspark', 'numpy', 'pyarrow', 'pandas') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
        "from jetspark import (window_aggregate, sliding, tumbling, session, ops, read_kafka_stream,\n"
        "                      read_rabbitmq_stream, jetspark_error_of, is_jetspark_error, OptionError)\n"
        "import jetspark.windowing as w, jetspark.datasources as d\n"
        "assert (window_aggregate, sliding, tumbling, session, ops) == (w.window_aggregate, w.sliding,\n"
        "        w.tumbling, w.session, w.ops)\n"
        "assert read_kafka_stream is d.read_kafka_stream and read_rabbitmq_stream is d.read_rabbitmq_stream\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        jetspark.nope  # noqa: B018
    assert "window_aggregate" in dir(jetspark)


@pytest.mark.parametrize("module", [jetspark, jetspark.datasources, jetspark.windowing])
def test_every_lazily_loaded_name_is_imported_for_type_checkers_and_exported(module) -> None:
    tree = ast.parse(Path(module.__file__).read_text())
    typed = set()
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom)
                typed |= {a.asname or a.name for a in imp.names}
                for a in imp.names:  # a name of that module, or the submodule of that name
                    assert module._LAZY[a.asname or a.name] in (imp.module, f"{imp.module}.{a.name}")
    assert typed == set(module._LAZY) and typed <= set(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None


def _public_functions():
    from jetspark import datasources, errors, windowing
    from jetspark.windowing import ops

    functions = [windowing.window_aggregate, windowing.sliding, windowing.tumbling, windowing.session,
                 datasources.read_kafka_stream, datasources.read_rabbitmq_stream,
                 errors.jetspark_error_of, errors.is_jetspark_error]
    functions += [f for name, f in vars(ops).items() if inspect.isfunction(f) and not name.startswith("_")
                  and f.__module__ == ops.__name__]
    return functions


@pytest.mark.parametrize("function", _public_functions(), ids=lambda f: f.__name__)
def test_every_parameter_is_documented_numpydoc_style(function) -> None:
    doc = inspect.getdoc(function)
    assert "\nParameters\n----------\n" in doc or not inspect.signature(function).parameters, function
    assert "\nReturns\n-------\n" in doc
    for p in inspect.signature(function).parameters.values():
        name = f"**{p.name}" if p.kind is p.VAR_KEYWORD else p.name
        assert f"\n{name} : " in doc, (function.__name__, name)


def test_help_of_window_aggregate_reads_as_sections() -> None:
    from jetspark.windowing import window_aggregate

    text = pydoc.render_doc(window_aggregate, renderer=pydoc.plaintext)
    for section in ("Parameters", "Returns", "Raises", "Examples"):
        assert f"    {section}\n    {'-' * len(section)}\n" in text
    signature = next(i for i, line in enumerate(text.splitlines()) if "window_aggregate(" in line)
    assert max(len(line) for line in text.splitlines()[signature + 1:]) <= 110  # no run-on paragraph
