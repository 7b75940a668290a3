"""Partial tables: the accumulators of (key, frame) cells as Arrow, between stage 1, stage 2
and the state store.

A partial table has the key columns, the position columns (``__frame``, or ``__start`` and
``__end`` for sessions) and one column per accumulator field (:class:`~.plan.Plan` names
them). Stage 1 sends it to stage 2 packed as Arrow IPC bytes, one blob per (input
partition, bucket); streaming state keeps a bucket's partial table the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from jetspark.windowing.aggregate_operation import Field
from jetspark.windowing.arrow_numpy import to_numpy

if TYPE_CHECKING:
    import pandas as pd

    from jetspark.windowing.plan import Plan


def to_arrow(field: Field, col: np.ndarray) -> pa.Array:
    """An accumulator column as an Arrow array (lists become ListArray)."""
    if not field.is_list:
        return pa.array(col, type=field.arrow_type)
    lengths = np.fromiter((len(x) for x in col), dtype=np.int32, count=len(col))
    offsets = np.zeros(len(col) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    sub = field.arrow_type.value_type.to_pandas_dtype()
    flat = np.concatenate(list(col)).astype(sub) if len(col) else np.empty(0, sub)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat))


def from_arrow(field: Field, arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """Inverse of :func:`to_arrow`."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if not field.is_list:
        return to_numpy(arr).astype(field.numpy_dtype, copy=False)
    offsets = arr.offsets.to_numpy()
    flat = arr.values.to_numpy(zero_copy_only=False)
    flat = flat[offsets[0] : offsets[-1]]
    parts = np.split(flat, offsets[1:-1] - offsets[0]) if len(arr) else []
    out = np.empty(len(parts), dtype=object)
    for i, p in enumerate(parts):
        out[i] = p
    return out


def partial_table(plan: Plan, keys: pa.Table, positions: dict[str, np.ndarray], accs) -> pa.Table:
    """Key columns, position columns (frame, or session start/end) and accumulator columns."""
    cols = {name: keys.column(name) for name in plan.keys}
    cols.update({name: pa.array(v, pa.int64()) for name, v in positions.items()})
    cols.update(plan.accs_to_columns(accs))
    return pa.table(cols)


_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")


def dump_table(
    table: pa.Table, *, compress: bool = True, metadata: dict[bytes, bytes] | None = None
) -> bytes:
    """Arrow IPC stream bytes (LZ4 unless ``compress`` is false, e.g. for data Spark's
    shuffle compresses anyway); ``metadata`` goes into the schema's metadata."""
    if metadata:
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_IPC_OPTIONS if compress else None) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def load_table(blob: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(blob)).read_all()


def schema_metadata(blob: bytes) -> dict[bytes, bytes]:
    """The schema metadata of IPC stream bytes, without reading their batches."""
    return pa.ipc.open_stream(pa.py_buffer(blob)).schema.metadata or {}


def unpack_partials(frames: Iterator[pd.DataFrame], schema: pa.Schema) -> tuple[pa.Table | None, int | None]:
    """New partial rows as one Arrow table, unpacked from stage 1's per-bucket blobs
    (first column, by position: transformWithStateInPandas does not keep the names),
    and the largest watermark the rows carry (fourth column, epoch µs; None: none);
    watermark carrier rows (null blob) add only their watermark."""
    import pandas as pd  # streaming state functions only (they receive pandas frames)

    tables, carried = [], None
    for pdf in frames:
        for blob in pdf.iloc[:, 0]:
            if isinstance(blob, bytes | bytearray | memoryview):
                tables.append(load_table(blob).cast(schema))
        if pdf.shape[1] > 3 and len(pdf):
            wm = pdf.iloc[:, 3].max()
            if not pd.isna(wm):
                carried = int(wm) if carried is None else max(carried, int(wm))
    tables = [t for t in tables if t.num_rows]
    if not tables:
        return None, carried
    return (tables[0] if len(tables) == 1 else pa.concat_tables(tables)), carried
