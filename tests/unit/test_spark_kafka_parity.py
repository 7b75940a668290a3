"""README's "From format("kafka") to format("jetkafka")" table against Spark's documented
Kafka options and columns (tests/fixtures/spark_kafka_integration_guide.json): every entry
of Spark's guide has exactly one row, and each claim the row makes holds in jetkafka's code."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from jetspark.datasources.kafka.broker import validate_consumer_conf
from jetspark.datasources.kafka.options import KafkaSourceOptions
from jetspark.datasources.kafka.schema import spark_schema
from jetspark.errors import OptionError
from jetspark.sinks.kafka.options import KafkaSinkOptions
from jetspark.sinks.kafka.rows import KafkaColumns
from tests import readme

GUIDE = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "spark_kafka_integration_guide.json")
                   .read_text())
KINDS = {"source_options": "source option", "source_columns": "source column", "sink_options": "sink option",
         "sink_columns": "sink column", "kafka_params_refused_by_spark": "kafka setting",
         "spark_conf": "Spark conf", "kafka_security_params": "security setting"}
STATUSES = {"same", "differs", "not supported", "not applicable"}
UNKNOWN = "one of the known options"
SOURCE_BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t", "startingOffsets": "earliest"}
SINK_BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t"}


def _table() -> dict[tuple[str, str], str]:
    """(kind, name) -> status, from the rows after ``<!-- spark-kafka-parity -->``."""
    text = readme.README.read_text()
    assert "<!-- spark-kafka-parity -->" in text, "README has no <!-- spark-kafka-parity --> table"
    lines = text.split("<!-- spark-kafka-parity -->", 1)[1].strip().splitlines()
    rows: dict[tuple[str, str], str] = {}
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        names, kind, status, _notes = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert status in STATUSES, f"{names}: status {status!r} is not one of {sorted(STATUSES)}"
        for name in readme._TICKED.findall(names):
            assert (kind, name) not in rows, f"{kind} {name} has two rows"
            rows[(kind, name)] = status
    return rows


TABLE = _table()
DOCUMENTED = sorted((KINDS[section], name) for section in KINDS for name in GUIDE[section])


def _rejects_as_unknown(parse, base, name) -> bool:
    try:
        parse({**base, name: "1"})
    except OptionError as e:
        return UNKNOWN in e.accepted
    return False


def test_the_table_names_exactly_what_sparks_guide_lists():
    assert sorted(TABLE) == DOCUMENTED


@pytest.mark.parametrize(("kind", "name"), [k for k in DOCUMENTED if k[0] == "source option"])
def test_source_option_claims(kind, name):
    parse = lambda raw: KafkaSourceOptions.parse(raw, streaming=False)  # noqa: E731
    unknown = _rejects_as_unknown(parse, SOURCE_BASE, name)
    assert unknown == (TABLE[(kind, name)] == "not supported"), f"{name}: {TABLE[(kind, name)]}"


@pytest.mark.parametrize(("kind", "name"), [k for k in DOCUMENTED if k[0] == "sink option"])
def test_sink_option_claims(kind, name):
    unknown = _rejects_as_unknown(KafkaSinkOptions.parse, SINK_BASE, name)
    assert unknown == (TABLE[(kind, name)] == "not supported"), f"{name}: {TABLE[(kind, name)]}"


def test_column_claims():
    source = {c.split()[0] for c in spark_schema(include_headers=True).split(", ")}
    sink = {f.name for f in dataclasses.fields(KafkaColumns)} | {"value"}
    for (kind, name), status in TABLE.items():
        if kind == "source column":
            assert (name in source) == (status in ("same", "differs")), name
        elif kind == "sink column":
            assert (name in sink) == (status in ("same", "differs")), name


def _source_start(raw) -> None:
    """What a query's start checks on the driver: the options, then the librdkafka settings."""
    validate_consumer_conf(KafkaSourceOptions.parse(raw, streaming=True).kafka)


@pytest.mark.parametrize(("kind", "name"), [k for k in DOCUMENTED if k[0] == "kafka setting"])
def test_kafka_settings_spark_refuses_are_refused_at_start(kind, name):
    """Spark refuses them; jetkafka does too (its own rule, or librdkafka does not know them),
    with an error that names the option; the sink refuses the serializers itself."""
    assert TABLE[(kind, name)] in ("same", "not supported")
    checks = [(_source_start, SOURCE_BASE)]
    if name.endswith(".serializer"):
        checks.append((KafkaSinkOptions.parse, SINK_BASE))
    for start, base in checks:
        with pytest.raises(OptionError) as err:
            start({**base, name: "x"})
        assert err.value.option == name


@pytest.mark.parametrize(("kind", "name"), [k for k in DOCUMENTED if k[0] == "security setting"])
def test_security_settings_are_translated_for_source_and_sink(kind, name):
    """The JAAS line of the PLAIN and SCRAM login modules becomes librdkafka's credentials."""
    assert (kind, name) == ("security setting", "kafka.sasl.jaas.config")
    assert TABLE[(kind, name)] == "differs"
    raw = {"kafka.sasl.mechanism": "PLAIN", name: 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                                  'required username="u" password="p";'}
    source = KafkaSourceOptions.parse({**SOURCE_BASE, **raw}, streaming=True).kafka
    sink = KafkaSinkOptions.parse({**SINK_BASE, **raw}).producer_config()
    for kafka in (source, sink):
        assert (kafka["sasl.username"], kafka["sasl.password"]) == ("u", "p")
