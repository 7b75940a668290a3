"""The native Kafka reader: librdkafka fills Arrow buffers in C, no Python object per record.

``_kafka_arrow`` (datasources/kafka/_kafka_arrow.c, built by ``pip install`` with a C compiler and
Python's headers) consumes with the GIL released; this module wraps its buffers as Arrow arrays
without copying. The extension is not linked with librdkafka: at import it is handed the
librdkafka that confluent-kafka loaded (found in ``/proc/self/maps``), so the process holds
one librdkafka, confluent-kafka's (docs/design.md, "Native Kafka reader: one librdkafka").
``AVAILABLE`` says whether that worked; :mod:`.read` falls back to confluent-kafka when not.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import confluent_kafka
import confluent_kafka.cimpl  # loads confluent-kafka's librdkafka into the process
import numpy as np
import pyarrow as pa

from jetspark.errors import JetsparkError
from jetspark.redaction import redact_dsn, scrub_fragments, secret_values


def librdkafka_path() -> str:
    """The file of the librdkafka that confluent-kafka's ``cimpl`` runs on (it is loaded).

    Read from ``/proc/self/maps``: a wheel bundles it as
    ``site-packages/confluent_kafka.libs/librdkafka-<hash>.so.1``, a build from source links
    a system one; both show up there. Should several be mapped, the one inside
    confluent-kafka's installation wins.
    """
    found: list[str] = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").partition("/")[2]
                if path and Path("/" + path).name.startswith("librdkafka") and "/" + path not in found:
                    found.append("/" + path)
    except OSError as e:
        raise ImportError(f"cannot read /proc/self/maps to find confluent-kafka's librdkafka: {e}") from None
    if not found:
        raise ImportError("confluent-kafka's librdkafka is not mapped into the process (not Linux?)")
    site = str(Path(confluent_kafka.__file__).resolve().parent.parent) + os.sep
    return next((f for f in found if f.startswith(site)), found[0])


def _load():
    """The extension, bound to confluent-kafka's librdkafka (ImportError when it cannot be)."""
    from jetspark.datasources.kafka import _kafka_arrow

    _kafka_arrow.load(librdkafka_path())
    version, number = confluent_kafka.libversion()
    if _kafka_arrow.librdkafka_version_int() != number:
        raise ImportError(f"the native reader loaded librdkafka {_kafka_arrow.librdkafka_version()} from "
                          f"{_kafka_arrow.loaded_path()}, but confluent-kafka runs on {version}")
    return _kafka_arrow


try:
    _kafka_arrow = _load()
except ImportError as e:  # not built (no C compiler at install), or librdkafka not found
    _kafka_arrow = None
    IMPORT_ERROR: str | None = str(e)
else:
    IMPORT_ERROR = None

AVAILABLE = _kafka_arrow is not None

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_BINARY = pa.binary()

# librdkafka's error codes the reader treats as data loss (records gone before we read them)
_AUTO_OFFSET_RESET = -140
_OFFSET_OUT_OF_RANGE = 1
DATA_LOSS_CODES = frozenset({_AUTO_OFFSET_RESET, _OFFSET_OUT_OF_RANGE})


class NativeConfigError(JetsparkError):
    """librdkafka rejects a setting (an unknown name or a bad value)."""


def describe() -> str:
    """``native (librdkafka x.y.z)``: confluent-kafka's librdkafka; only when ``AVAILABLE``."""
    if _kafka_arrow is None:
        raise JetsparkError(f"the native Kafka reader is not available: {IMPORT_ERROR}")
    return f"native (librdkafka {_kafka_arrow.librdkafka_version()})"


@dataclass(frozen=True)
class Chunk:
    """Consecutive records of one partition (offset order) and why the read stopped."""

    keys: pa.Array
    values: pa.Array
    headers: pa.Array | None
    offsets: np.ndarray
    """int64 record offsets (gaps where the log has control records or aborted data)."""
    timestamps: np.ndarray
    """int64 epoch ms."""
    timestamp_types: np.ndarray
    """int32, Spark's ids: -1 none, 0 create time, 1 log-append time."""
    eof_at: int | None
    """Partition EOF was seen at this offset (the log's end then)."""
    past_end: bool
    """A record at or past the requested end was seen (and not kept)."""
    error_code: int
    """librdkafka error code (0: none); records before the error are in the chunk."""
    error: str | None

    @property
    def rows(self) -> int:
        return len(self.offsets)

    @property
    def data_loss(self) -> bool:
        return self.error_code in DATA_LOSS_CODES


def _conf_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _binary(n: int, col: tuple, type_: pa.DataType = _BINARY) -> pa.Array:
    validity, offsets, data, nulls = col
    bufs = [None if validity is None else pa.py_buffer(validity), pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(type_, n, bufs, null_count=nulls)


def _headers(n: int, h: dict) -> pa.Array:
    entries = len(h["key"][1]) // 4 - 1  # header entries of all records: the key offsets hold entries + 1
    keys, values = _binary(entries, h["key"], pa.string()), _binary(entries, h["value"])
    struct = pa.StructArray.from_arrays([keys, values], fields=list(HEADERS_TYPE.value_type))
    validity = None if h["validity"] is None else pa.py_buffer(h["validity"])
    return pa.Array.from_buffers(HEADERS_TYPE, n, [validity, pa.py_buffer(h["offsets"])],
                                 null_count=h["nulls"], children=[struct])


class NativeConsumer:
    """A librdkafka consumer reading one assigned partition at a time into Arrow chunks."""

    def __init__(self, conf: Mapping[str, object]) -> None:
        if _kafka_arrow is None:
            raise JetsparkError(f"the native Kafka reader is not available: {IMPORT_ERROR}")
        try:
            self._reader = _kafka_arrow.Reader({str(k): _conf_value(v) for k, v in conf.items()})
        except ValueError as e:
            secrets = secret_values({str(k): str(v) for k, v in conf.items()})
            text = redact_dsn(scrub_fragments(str(e), secrets))
            raise NativeConfigError(f"{text} (librdkafka {_kafka_arrow.librdkafka_version()})") from None

    def assign(self, topic: str, partition: int, offset: int) -> None:
        """Read ``partition`` of ``topic`` from ``offset`` on (replacing any assignment)."""
        self._call(self._reader.assign, topic, partition, offset)

    def unassign(self) -> None:
        self._call(self._reader.unassign)

    def read(self, max_rows: int, end: int, timeout_ms: int, *, headers: bool = False) -> Chunk:
        """Up to ``max_rows`` records before offset ``end``, waiting at most ``timeout_ms``."""
        raw = self._reader.read(max_rows, end, timeout_ms, headers)
        n = raw["rows"]
        return Chunk(
            keys=_binary(n, raw["key"]),
            values=_binary(n, raw["value"]),
            headers=None if raw["headers"] is None else _headers(n, raw["headers"]),
            offsets=np.frombuffer(raw["offset"], np.int64),
            timestamps=np.frombuffer(raw["timestamp"], np.int64),
            timestamp_types=np.frombuffer(raw["timestamp_type"], np.int32),
            eof_at=raw["eof_at"], past_end=raw["past_end"], error_code=raw["error_code"], error=raw["error"],
        )

    def get_watermark_offsets(self, topic: str, partition: int, timeout_s: float = 30) -> tuple[int, int]:
        """(low, high) offsets of the partition, asked from the broker."""
        return self._call(self._reader.watermark_offsets, topic, partition, int(timeout_s * 1000))

    def close(self) -> None:
        self._reader.close()

    @staticmethod
    def _call(fn, *args):
        try:
            return fn(*args)
        except RuntimeError as e:
            raise JetsparkError(str(e)) from None
