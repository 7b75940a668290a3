"""The documentation's options tables cannot drift from the parsers (see tests/readme.py for the
markers; the tables are in docs/reference/).

The tables are written by hand (their meanings and errors columns are prose the parsers do not
hold) and checked here against the code.

For each ``<!-- options: FORMAT -->`` table: its option names are exactly the names the
format's parser knows; each is accepted by the parser; a default written as one literal
value parses to the same options as leaving the option out; options marked "(required)"
are required. The ``window_aggregate`` parameter table matches the function's signature.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pytest

from jetspark.datasources.kafka import options as kafka_options
from jetspark.datasources.kafkashare import options as share_options
from jetspark.datasources.rabbitmq import options as rabbitmq_options
from jetspark.errors import OptionError
from jetspark.sinks.jdbc import options as jdbc_options
from jetspark.sinks.kafka import options as sink_kafka_options
from jetspark.windowing import window_aggregate
from tests import readme

UNKNOWN_OPTION = "one of the known options"
WATERMARK_HEARTBEATS = "watermark.heartbeats"
RECORD = '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}'


@dataclass(frozen=True)
class Format:
    parse: Callable[[Mapping[str, str]], object]
    base: dict[str, str]
    """Minimal valid options."""
    known: tuple[str, ...]
    prefix: str | None = None
    requires: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Options that are only valid together with others: name -> the others."""


FORMATS = {
    "jetkafka-source": Format(
        lambda raw: kafka_options.KafkaSourceOptions.parse(raw, streaming=False),
        {"kafka.bootstrap.servers": "127.0.0.1:9092", "kafka.group.id": "g", "subscribe": "t",
         "startingOffsets": "earliest"},
        kafka_options.KNOWN, "kafka.",
        {"eventTime.format": {"eventTime.field": "ts"}, "eventTime.onMalformed": {"eventTime.field": "ts"},
         **{name: {"value.format": "avro", "value.schema": '"string"'}
            for name in ("value.onMalformed", "value.subject.strategy")},
         "value.flatten": {"value.format": "avro", "value.schema": RECORD}}),
    "jetkafka-sink": Format(
        sink_kafka_options.KafkaSinkOptions.parse,
        {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t"},
        sink_kafka_options.KNOWN, "kafka."),
    "jetkafkashare-source": Format(
        share_options.ShareOptions.parse,
        {"kafka.bootstrap.servers": "127.0.0.1:9092", "kafka.group.id": "g", "subscribe": "t"},
        share_options.KNOWN, "kafka."),
    "jetrabbitmq-source": Format(
        rabbitmq_options.RabbitMQOptions.parse,
        {"url": "amqp://guest:guest@127.0.0.1:5672/%2F", "queue": "q", "walLocation": "/tmp/wal"},
        rabbitmq_options.KNOWN),
    "jetjdbc-sink": Format(
        jdbc_options.JdbcSinkOptions.parse,
        {"url": "postgresql://jetspark@127.0.0.1:5432/jetspark", "table": "t"},
        jdbc_options.KNOWN),
}
TABLES = readme.options_tables()


def _rows(name: str) -> list[readme.OptionRow]:
    assert name in TABLES, f"README has no <!-- options: {name} --> table"
    return TABLES[name]


def _plain_names(fmt: Format, rows: list[readme.OptionRow]) -> list[str]:
    """Documented option names, without the prefix row (``kafka.*``) and prefixed settings."""
    names = [n for row in rows for n in row.names]
    return [n for n in names if not (fmt.prefix and n.startswith(fmt.prefix))]


def test_every_table_is_checked():
    assert set(TABLES) == set(FORMATS)


@pytest.mark.parametrize("name", FORMATS)
def test_table_lists_exactly_the_parsers_options(name):
    fmt = FORMATS[name]
    rows = _rows(name)
    documented = _plain_names(fmt, rows)
    assert len(documented) == len(set(documented)), f"{name}: an option is listed twice"
    assert sorted(documented) == sorted(fmt.known)
    if fmt.prefix:
        all_names = {n for row in rows for n in row.names}
        assert {f"{fmt.prefix}*", f"{fmt.prefix}bootstrap.servers"} <= all_names


@pytest.mark.parametrize("name", FORMATS)
def test_documented_options_are_accepted(name):
    fmt = FORMATS[name]
    for option in _plain_names(fmt, _rows(name)):
        try:
            fmt.parse({**fmt.base, option: "1"})
        except OptionError as e:  # a bad value is fine here; an unknown name is not
            assert UNKNOWN_OPTION not in e.accepted, f"{name}: {option} is rejected as unknown"


@pytest.mark.parametrize("name", FORMATS)
def test_literal_defaults_are_the_parsers_defaults(name):
    fmt = FORMATS[name]
    checked = 0
    for row in _rows(name):
        value = row.literal_default
        if value is None:
            continue
        for option in row.names:
            base = {**fmt.base, **fmt.requires.get(option, {})}
            if option.startswith("watermark."):  # any watermark.* option turns heartbeats on
                base[WATERMARK_HEARTBEATS] = "true"
            explicit = fmt.parse({**base, option: value})
            assert explicit == fmt.parse(base), f"{name}: {option} default is not {value!r}"
            checked += 1
    assert checked > 0


@pytest.mark.parametrize("name", FORMATS)
def test_required_options_are_required(name):
    fmt = FORMATS[name]
    for row in _rows(name):
        if row.default != "(required)":
            continue
        without = {k: v for k, v in fmt.base.items() if k not in row.names}
        assert without != fmt.base, f"{name}: the test's base options lack {row.names}"
        with pytest.raises(OptionError) as err:
            fmt.parse(without)
        assert any(n in err.value.option for n in row.names)


def test_windowing_parameters_table_matches_the_signature():
    text = readme.README.read_text()
    table = text.split("<!-- windowing-parameters -->", 1)[1].strip().splitlines()
    rows = [[c.strip() for c in line.strip().strip("|").split(" | ")]
            for line in table[2:] if line.startswith("|")]
    rows = rows[: next((i for i, r in enumerate(rows) if not r[0].startswith("`")), len(rows))]
    params = dict(inspect.signature(window_aggregate).parameters)
    params.pop("df")
    assert [r[0].strip("`") for r in rows] == list(params)
    for name, default, _meaning in rows:
        param = params[name.strip("`")]
        if default == "(required)":
            assert param.default is inspect.Parameter.empty, name
        else:
            literal = re.fullmatch(r"`(.*)`", default)
            assert literal, f"{name}: default {default!r} is not a literal"
            assert ast.literal_eval(literal.group(1)) == param.default, name


def test_every_builtin_operation_is_listed():
    from jetspark.windowing import AggregateOperation, ops

    builtins = [name for name, fn in vars(ops).items()
                if inspect.isfunction(fn) and not name.startswith("_")
                and isinstance(inspect.signature(fn).return_annotation, str)
                and issubclass(getattr(ops, inspect.signature(fn).return_annotation), AggregateOperation)]
    text = readme.README.read_text()
    assert builtins
    assert [n for n in builtins if f"`{n}`" not in text and f"`{n}(" not in text] == []


@pytest.mark.parametrize("marker",
                         ["spark-kafka-parity", "sink-words", "iso8601-forms", "windowing-parameters"])
def test_each_table_marker_is_on_one_page_once(marker):
    """The tests that read a marked table take its first marker over all pages: one only."""
    text = readme.README.read_text()
    assert text.count(f"<!-- {marker} -->") == 1, marker
