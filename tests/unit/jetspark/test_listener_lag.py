"""Spark's Kafka lag metrics, read from either place a source puts them."""

from __future__ import annotations

import json

from jetspark.listener import offsets_behind_latest


def test_lag_from_sparks_metrics_and_from_jetkafkas_latest_offset():
    figures = {"minOffsetsBehindLatest": 0, "maxOffsetsBehindLatest": 7, "avgOffsetsBehindLatest": 3.5}
    progress = {"sources": [
        {"description": "KafkaV2[Subscribe[t]]", "latestOffset": '{"t":{"0":9}}',
         "metrics": {k: str(v) for k, v in figures.items()}},  # Spark's source: strings
        {"description": "jetkafka", "metrics": {},
         "latestOffset": json.dumps({"offsets": {"t": {"0": 9}}, **figures})},
        {"description": "rate", "latestOffset": "12"},
        {"description": "jetrabbitmq", "latestOffset": None},
    ]}
    as_float = {k: float(v) for k, v in figures.items()}
    assert offsets_behind_latest(progress) == [as_float, as_float, None, None]
    assert offsets_behind_latest(json.dumps(progress))[1] == as_float
    # a StreamingQueryProgress's JSON carries the offsets parsed
    progress["sources"][1]["latestOffset"] = json.loads(progress["sources"][1]["latestOffset"])
    assert offsets_behind_latest(progress)[1] == as_float
