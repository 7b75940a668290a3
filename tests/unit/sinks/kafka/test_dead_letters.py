"""A dead letter always fits under message.max.bytes, jetspark's headers first (pure logic)."""

from __future__ import annotations

import pytest

from jetspark.sinks.kafka.rejected import dead_letter
from jetspark.sinks.kafka.rows import Rejection, Unfit
from jetspark.sinks.transactional import PartitionKey

TASK = PartitionKey("sink1", 7, 3, 0)


def _size(value, key, headers) -> int:
    def n(x):
        return 0 if x is None else len(x.encode() if isinstance(x, str) else x)
    return n(value) + n(key) + sum(n(k) + n(v) + 10 for k, v in headers)


def _marks(headers) -> dict:
    return {k[len("jetspark.rejected."):]: v for k, v in headers if k.startswith("jetspark.rejected.")}


def test_a_letter_that_fits_keeps_the_record_and_drops_forged_headers():
    why = Rejection(0, "t", 9, Unfit("partition 9 does not exist"))
    headers = [("jetspark.rejected.reason", b"forged"), ("Jetspark.Rejected.topic", b"x"), ("mine", b"1")]
    value, key, letter = dead_letter(why, why.why.reason, TASK, "v", "k", headers, 10_000)
    assert (value, key) == ("v", "k")
    assert [k for k, _ in letter][:5] == [f"jetspark.rejected.{n}" for n in
                                          ("topic", "partition", "reason", "sink", "batch")]
    assert letter[-1] == ("mine", b"1") and b"forged" not in [v for _, v in letter]
    assert _marks(letter)["cut"] == "forgedHeaders" and _marks(letter)["reason"] == why.why.reason


@pytest.mark.parametrize("budget", [744, 5_000, 100_000])
@pytest.mark.parametrize("big", ["value", "key", "headers"])
def test_the_largest_part_is_dropped_until_the_letter_fits(big, budget):
    parts = {"value": b"v" * 10, "key": "k" * 10, "headers": [("h", b"1")]}
    parts[big] = [("h", b"y" * 200_000)] if big == "headers" else "z" * 200_000
    why = Rejection(2, "t" * 100_000, None, Unfit("Message size too large " + "r" * 100_000, True))
    value, key, letter = dead_letter(why, why.why.reason, TASK, parts["value"], parts["key"],
                                     parts["headers"], budget)
    marks = _marks(letter)
    assert _size(value, key, letter) <= budget
    assert f"{big}Bytes" in marks and big in marks["cut"].split(",")
    assert marks["topic"].endswith("…[cut: 100000 bytes]") and "topic" in marks["cut"]
    assert "reason" in marks["cut"]
    if budget >= 5_000:  # room for the others: only the largest goes
        assert marks["cut"] == f"topic,reason,{big}"


def test_a_record_too_large_loses_at_least_its_largest_part():
    """librdkafka said too large: the letter drops a part even where the estimate says it fits."""
    why = Rejection(0, "t", None, Unfit("Message size too large", True))
    value, key, letter = dead_letter(why, why.why.reason, TASK, b"v" * 900, b"k", None, 10_000)
    assert value is None and key == b"k" and _marks(letter)["valueBytes"] == "900"
