"""The column arguments of :func:`~jetspark.windowing.window_aggregate`: names or ``Column``s.

``key``, ``time`` and every operation's inputs take a column name or a ``pyspark.sql.Column``.
A Column that only names a column of the DataFrame (``F.col("x")``, ``df["x"]``) is that
column. Any other expression (``F.col("a") * 2``, ``F.upper("s")``) is computed as a hidden
column of the input (``__jetspark_…``) in one projection before windowing, so the stages read
plain columns and the operations stay vectorized; a key computed so is shown under the name
Spark gives the expression (``upper(s)``, or its ``alias``), as ``groupBy`` does. Hidden
names follow the arguments' positions, so a restarted query finds its state under the same
names; a plain column keeps its own name (``key="k"`` and ``key=F.col("k")`` share a checkpoint).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DataType

from jetspark.windowing.aggregate_operation import AggregateError, AggregateOperation

ColumnOrName = Column | str
#: Prefix of the hidden columns that hold computed inputs.
HIDDEN = "__jetspark_"


@dataclass
class Inputs:
    """The DataFrame with computed inputs added, and every argument as a column name."""

    df: DataFrame
    keys: tuple[str, ...]
    time: str
    aggs: dict[str, AggregateOperation]
    renames: dict[str, str] = field(default_factory=dict)
    """Hidden key column → the name the result shows."""
    shown: dict[str, str] = field(default_factory=dict)
    """Hidden column → the expression's name, for messages."""

    def output(self, out: DataFrame) -> DataFrame:
        """The result with computed keys under their shown names."""
        return out.withColumnsRenamed(self.renames) if self.renames else out


def _quoted(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


class _Resolver:
    def __init__(self, df: DataFrame) -> None:
        self.df = df
        self.exprs: dict[str, Column] = {}
        self.seen: dict[tuple[str, DataType], str] = {}
        self.shown: dict[str, str] = {}

    def name(self, col: object, hidden: str, what: str) -> tuple[str, str]:
        """(the column to read, the name Spark gives it) for a name or a Column."""
        if isinstance(col, str):
            return col, col
        if not isinstance(col, Column):
            raise AggregateError(f"{what}: a column name (str) or a pyspark.sql.Column, got {col!r}")
        selected = self.df.select(col)
        f = selected.schema.fields[0]
        if f.name in self.df.columns and selected.sameSemantics(self.df.select(_quoted(f.name))):
            return f.name, f.name  # just a column of the DataFrame
        same = (str(col), f.dataType)
        if same in self.seen:
            return self.seen[same], f.name
        self.seen[same] = hidden
        self.exprs[hidden] = col
        self.shown[hidden] = f.name
        return hidden, f.name


def resolve_inputs(
    df: DataFrame,
    key: ColumnOrName | Sequence[ColumnOrName],
    time: ColumnOrName,
    aggs: Mapping[str, AggregateOperation],
) -> Inputs:
    """Every column argument as a column name of the returned DataFrame (see the module)."""
    r = _Resolver(df)
    keys_in = [key] if isinstance(key, str | Column) else list(key)
    keys, renames = [], {}
    for i, k in enumerate(keys_in):
        read, shown = r.name(k, f"{HIDDEN}key{i}", "key")
        keys.append(read)
        if read != shown:
            renames[read] = shown
    time_name, _ = r.name(time, f"{HIDDEN}time", "time")
    resolved: dict[str, AggregateOperation] = {}
    n = 0
    for name, op in aggs.items():
        if not isinstance(op, AggregateOperation) or not any(isinstance(c, Column) for c in op.inputs):
            resolved[name] = op
            continue
        inputs = []
        for c in op.inputs:
            if isinstance(c, Column):
                c, _ = r.name(c, f"{HIDDEN}in{n}", f"aggregate {name!r}")
                n += 1
            inputs.append(c)
        op = copy.copy(op)  # the user's operation keeps its Columns
        op.inputs = tuple(inputs)
        resolved[name] = op
    shown_keys = [renames.get(k, k) for k in keys]
    if renames:
        taken = [*shown_keys, "window_start", "window_end", "final", *aggs]
        for shown in renames.values():
            if taken.count(shown) > 1:
                raise AggregateError(
                    f"key {shown!r} (computed) has the name of another column of the result "
                    f"{taken}; give it another with .alias()")
    out = df.withColumns(r.exprs) if r.exprs else df
    return Inputs(out, tuple(keys), time_name, resolved, renames, r.shown)
