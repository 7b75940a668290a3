"""The compiled description of one windowed aggregation, shared by both stages.

A :class:`Plan` is small and picklable: it travels to the Python workers inside the
stage functions. It fixes the column names of the partial tables exchanged between
stage 1 and stage 2 and kept in state::

    <key columns…>, __frame | (__start, __end), __a<i>_<field>…
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jetspark.columns import TIMESTAMP_TYPE, from_numpy
from jetspark.windowing.aggregate_operation import EVENT_TIME, Acc, AggregateError, AggregateOperation
from jetspark.windowing.definitions import SessionWindow, SlidingWindow, WindowDefinition
from jetspark.windowing.partials import from_arrow, to_arrow

FRAME = "__frame"
START = "__start"
END = "__end"
BUCKET = "__bucket"
#: State-only column of early results: the cell (or session) changed since its windows'
#: last provisional emission (docs/design.md, "Early results").
CHANGED = "__changed"



@dataclass(frozen=True)
class Plan:
    """Key columns, event-time column, window definition and named operations."""

    keys: tuple[str, ...]
    time: str
    window: WindowDefinition
    names: tuple[str, ...]
    ops: tuple[AggregateOperation, ...]
    use_deduct: bool = True
    columns: tuple[tuple[str, ...], ...] = ()
    early_results_us: int | None = None  # the period of provisional rows; None: final rows only

    @staticmethod
    def build(
        keys: str | tuple[str, ...] | list[str],
        time: str,
        window: WindowDefinition,
        aggs: Mapping[str, AggregateOperation],
        use_deduct: bool = True,
        early_results_us: int | None = None,
    ) -> Plan:
        keys_t = (keys,) if isinstance(keys, str) else tuple(keys)
        if not keys_t:
            raise AggregateError("at least one key column is required")
        if not aggs:
            raise AggregateError("at least one aggregate operation is required")
        for name, op in aggs.items():
            if not isinstance(op, AggregateOperation):
                raise AggregateError(f"aggregate {name!r} is not an AggregateOperation: {op!r}")
        if not isinstance(window, SlidingWindow | SessionWindow):
            raise AggregateError(f"window must be sliding(), tumbling() or session(): {window!r}")
        ops = tuple(aggs.values())
        shared: dict[tuple, str] = {}
        columns = []
        for i, op in enumerate(ops):
            names = []
            for f in op.fields:
                if f.shared is None:
                    names.append(f"__a{i}_{f.name}")
                else:
                    key = (f.shared, f.kind, op.inputs)
                    names.append(shared.setdefault(key, f"__s{len(shared)}_{f.shared}"))
            columns.append(tuple(names))
        return Plan(keys_t, time, window, tuple(aggs), ops, use_deduct, tuple(columns), early_results_us)

    # --- names ----------------------------------------------------------------------------
    def field_columns(self, i: int) -> tuple[str, ...]:
        """Column names of op ``i``'s fields in partial tables (shared fields stored once)."""
        return self.columns[i]

    @property
    def early(self) -> bool:
        """Whether open windows are also emitted as provisional rows (``early_results``)."""
        return self.early_results_us is not None

    @property
    def is_session(self) -> bool:
        return isinstance(self.window, SessionWindow)

    @property
    def position_columns(self) -> tuple[str, ...]:
        return (START, END) if self.is_session else (FRAME,)

    @property
    def input_columns(self) -> list[str]:
        """Columns stage 1 reads from the user's rows."""
        cols = [*self.keys, self.time]
        for op in self.ops:
            cols.extend(c for c in op.inputs if c != EVENT_TIME and c not in cols)
        return cols

    def partial_spark_fields(self) -> list[tuple[str, str]]:
        """(name, Spark DDL type) of the non-key partial columns."""
        out = {c: "bigint" for c in self.position_columns}
        for i, op in enumerate(self.ops):
            for c, f in zip(self.field_columns(i), op.fields, strict=True):
                out.setdefault(c, f.spark_type)
        return list(out.items())

    # --- accumulator columns <-> Arrow ----------------------------------------------------
    def accs_from_table(self, table: pa.Table) -> list[Acc]:
        cache: dict[str, np.ndarray] = {}
        out = []
        for i, op in enumerate(self.ops):
            acc = []
            for c, f in zip(self.field_columns(i), op.fields, strict=True):
                if c not in cache:
                    cache[c] = from_arrow(f, table.column(c))
                acc.append(cache[c])
            out.append(tuple(acc))
        return out

    def accs_to_columns(self, accs: list[Acc]) -> dict[str, pa.Array]:
        out = {}
        for i, (op, acc) in enumerate(zip(self.ops, accs, strict=True)):
            for c, f, col in zip(self.field_columns(i), op.fields, acc, strict=True):
                if c not in out:
                    out[c] = to_arrow(f, col)
        return out

    def results_to_columns(self, accs: list[Acc]) -> dict[str, pa.Array]:
        out = {}
        for name, op, acc in zip(self.names, self.ops, accs, strict=True):
            res = op.finish(acc)
            out[name] = res if isinstance(res, pa.Array) else _column(np.asarray(res))
        return out

    def input_arrays(self, table: pa.Table, t_us: np.ndarray, op: AggregateOperation) -> list[np.ndarray]:
        """The op's input columns as numpy (float64, NaN = null; event time as int64).
        Integers beyond 2**53 are rounded to the nearest double, as Spark's cast to double
        does; for an op that does not read values (``count``) any type is read as 0.0 or null."""
        cols = []
        for c in op.inputs:
            if c == EVENT_TIME:
                cols.append(t_us)
                continue
            col = table.column(c)
            if not op.reads_values and not _is_number(col.type):
                col = pc.if_else(pc.is_valid(col), 0.0, pa.scalar(None, pa.float64()))
            cols.append(pc.cast(col, pa.float64(), safe=False).to_numpy())
        return cols


def _column(values: np.ndarray) -> pa.Array:
    """A result column: integers and floats through buffers, anything else by pyarrow."""
    if values.dtype.kind in "iuf":
        return from_numpy(values, pa.from_numpy_dtype(values.dtype))
    return pa.array(values)


def _is_number(t: pa.DataType) -> bool:
    types = pa.types
    return types.is_integer(t) or types.is_floating(t) or types.is_decimal(t) or types.is_boolean(t)


def time_to_us(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A timestamp column as int64 microseconds (nulls not allowed)."""
    if col.null_count:
        raise AggregateError("the event-time column contains nulls")
    t = col.type
    if pa.types.is_timestamp(t):
        if t.unit != "us":
            col = pc.cast(col, pa.timestamp("us", tz=t.tz))
        return pc.cast(col, pa.int64()).to_numpy()
    if pa.types.is_integer(t):
        return pc.cast(col, pa.int64()).to_numpy()
    raise AggregateError(f"the event-time column must be a timestamp, got {t}")


def us_to_ts(us: np.ndarray) -> pa.Array:
    return from_numpy(us, TIMESTAMP_TYPE)
