"""Subject names: under which subject of the registry a topic's key or value schema lives
(Confluent's subject name strategies)."""

from __future__ import annotations

from jetspark.errors import OptionError
from jetspark.options import Options

#: ``topic``: ``<topic>-key`` / ``<topic>-value`` (TopicNameStrategy, the default);
#: ``record``: the record's full name (RecordNameStrategy); ``topic-record``:
#: ``<topic>-<record full name>`` (TopicRecordNameStrategy).
STRATEGIES = ("topic", "record", "topic-record")


def subject_name(strategy: str, topic: str, *, is_key: bool, record_name: str | None = None,
                 option: str = "value.subject.strategy") -> str:
    """The subject of ``topic``'s key (``is_key``) or value schema under ``strategy``."""
    if strategy == "topic":
        return f"{topic}-{'key' if is_key else 'value'}"
    if strategy not in STRATEGIES:
        raise OptionError(option, strategy, " or ".join(STRATEGIES))
    if not record_name:
        raise OptionError(option, strategy, "topic, unless the record's full name is given "
                          f"({option.rsplit('.', 1)[0]}.record)")
    return record_name if strategy == "record" else f"{topic}-{record_name}"


def subject_option(opts: Options, topics: tuple[str, ...], column: str,
                   one_topic: str = "the query subscribes to exactly one topic (subscribe)") -> str:
    """The subject of the ``column``'s schema: ``<column>.subject``, else named by
    ``<column>.subject.strategy`` from the one topic (``one_topic`` says where it comes from)."""
    explicit = opts.string(f"{column}.subject")
    if explicit is not None:
        return explicit
    strategy = opts.choice(f"{column}.subject.strategy", "topic", STRATEGIES)
    record = opts.string(f"{column}.subject.record")
    is_key = column == "key"
    if strategy == "record":
        return subject_name(strategy, "", is_key=is_key, record_name=record,
                            option=f"{column}.subject.strategy")
    if len(topics) != 1:
        raise OptionError(f"{column}.subject", None, f"the subject of the {column}s' schema, needed "
                          f"unless {one_topic}")
    return subject_name(strategy, topics[0], is_key=is_key, record_name=record,
                        option=f"{column}.subject.strategy")


def version_option(opts: Options, column: str) -> int | None:
    name = f"{column}.schema.version"
    raw = opts.string(name, "latest")
    if raw == "latest":
        return None
    try:
        version = int(raw)
    except ValueError:
        version = 0
    if version < 1:
        raise OptionError(name, raw, "latest or a version number >= 1")
    return version


def format_option(opts: Options, column: str, formats: tuple[str, ...], suffixes: tuple[str, ...]) -> str:
    """``<column>.format`` (``bytes`` by default), after refusing the column's other options
    (``<column>.<suffix>``) with ``bytes`` and ``<column>.message`` with another format than
    Protobuf."""
    fmt = opts.choice(f"{column}.format", "bytes", formats)
    if fmt == "bytes":
        for suffix in suffixes:
            name = f"{column}.{suffix}"
            if suffix != "format" and opts.get(name) is not None:
                raise OptionError(name, opts.get(name),
                                  f"nothing unless {column}.format is avro, protobuf or json-schema")
    elif fmt != "protobuf" and opts.get(f"{column}.message") is not None:
        raise OptionError(f"{column}.message", opts.get(f"{column}.message"),
                          f"nothing unless {column}.format is protobuf")
    return fmt
