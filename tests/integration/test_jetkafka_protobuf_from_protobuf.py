"""jetkafka's Protobuf values judged by recorded ``from_protobuf`` results: each case of
tests/fixtures/from_protobuf_observed.json (what Spark's own ``from_protobuf`` gave for these
records, with the Spark build and the commit it was observed in) is written with Google's
runtime, read by ``format("jetkafka")`` with ``value.format=protobuf`` and the file inline, and
must give the recorded fields; a record ``from_protobuf`` failed on is malformed here (a null
value and a reason). spark-protobuf is not served by the Maven repository reachable here, so
``from_protobuf`` itself cannot run in CI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.protobuf import json_format

from tests.integration.scripts.jetkafka_common import produce_values
from tests.protobuf_orders import closed_file, defaults_file, message_class, serialized

pytestmark = pytest.mark.integration

OBSERVED = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "from_protobuf_observed.json")
                      .read_text())
FILES = {"defaults_file()": defaults_file, "closed_file()": closed_file,
         "closed_file(writer=True)": lambda: closed_file(writer=True)}


def _expected(v):
    """A recorded value as Spark's row gives it: ``{"hex": ...}`` as bytes."""
    if isinstance(v, dict):
        return bytes.fromhex(v["hex"]) if set(v) == {"hex"} else {k: _expected(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_expected(x) for x in v]
    return v


def _plain(v):
    if hasattr(v, "asDict"):
        return {k: _plain(x) for k, x in v.asDict().items()}
    if isinstance(v, bytearray):
        return bytes(v)
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def test_the_fixture_says_where_each_case_was_observed():
    assert OBSERVED["provenance"]["spark"] and OBSERVED["provenance"]["observed_in"].keys() == {
        case["name"] for case in OBSERVED["cases"]}


@pytest.mark.parametrize("case", OBSERVED["cases"], ids=[c["name"] for c in OBSERVED["cases"]])
def test_jetkafka_gives_what_from_protobuf_gave(spark, kafka_bootstrap, kafka_topic, case):
    writer = message_class(FILES[case.get("writer_file", case["file"])](), case["reader"])
    topic = kafka_topic()
    produce_values(kafka_bootstrap, topic, [json_format.ParseDict(r, writer()).SerializeToString()
                                            for r in case["records"]])
    from pyspark_jetkafka import DefaultSource

    spark.dataSource.register(DefaultSource)
    rows = (spark.read.format("jetkafka").option("kafka.bootstrap.servers", kafka_bootstrap)
            .option("subscribe", topic).option("value.format", "protobuf")
            .option("value.message", case["reader"].rsplit(".", 1)[1])
            .option("value.schema", serialized(FILES[case["file"]]())).load()
            .orderBy("offset").select("value", "valueError").collect())
    assert len(rows) == len(case["observed"])
    for i, (row, observed) in enumerate(zip(rows, case["observed"], strict=True)):
        if observed == "fails":
            assert (row.value, row.valueError is not None) == (None, True), f"record {i}: {row}"
            continue
        got = _plain(row.value)
        assert row.valueError is None and got is not None, f"record {i}: {row.valueError}"
        assert {k: got[k] for k in observed} == _expected(observed), f"record {i}"
