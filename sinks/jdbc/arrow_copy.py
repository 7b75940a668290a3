"""Arrow record batches as PostgreSQL ``COPY … FROM STDIN (FORMAT csv)`` input, vectorized.

pyarrow's CSV writer renders every column in C++; PostgreSQL's CSV reading matches it:
an unquoted empty field is NULL, a quoted empty string is ''; timestamps with a time zone
end in ``Z``. Binary columns are the one exception: they are sent as bytea hex text.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.csv as pcsv

_WRITE_OPTIONS = pcsv.WriteOptions(include_header=False, quoting_style="needed")


def _bytea_hex(column: pa.Array) -> pa.Array:
    """Binary values as PostgreSQL bytea hex input (``\\x0a1b…``); nulls stay null."""
    values = column.to_pylist()
    return pa.array([None if v is None else "\\x" + v.hex() for v in values], pa.string())


def _copyable(batch: pa.RecordBatch) -> pa.RecordBatch:
    columns = []
    changed = False
    for column in batch.columns:
        if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
            column = _bytea_hex(column)
            changed = True
        columns.append(column)
    if not changed:
        return batch
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def to_csv(batch: pa.RecordBatch) -> pa.Buffer:
    """``batch`` rendered as COPY csv input (no header)."""
    sink = pa.BufferOutputStream()
    pcsv.write_csv(_copyable(batch), sink, _WRITE_OPTIONS)
    return sink.getvalue()
