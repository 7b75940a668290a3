"""Option parsing: typed values, and errors that name option, value and what is accepted."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jetspark.errors import JetsparkError, OptionError
from jetspark.options import Options, parse_duration_ms


def test_lookup_is_case_insensitive_and_prefix_keeps_spelling():
    opts = Options({"maxOffsetsPerTrigger": "10", "kafka.bootstrap.servers": "h:1",
                    "Kafka.Enable.Idempotence": "true"})
    assert opts.integer("maxoffsetspertrigger", None) == 10
    assert opts.with_prefix("kafka.") == {"bootstrap.servers": "h:1", "Enable.Idempotence": "true"}


@pytest.mark.parametrize(
    ("text", "ms"),
    [("10 seconds", 10_000), ("500ms", 500), ("2m", 120_000), ("1.5 hours", 5_400_000),
     ("250", 250), ("interval 3 minutes", 180_000), ("0s", 0)],
)
def test_durations(text, ms):
    assert parse_duration_ms(text) == ms


@given(st.integers(min_value=0, max_value=10**9), st.sampled_from(["ms", "s", "m", "h"]))
def test_duration_units_scale(n, unit):
    factor = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}[unit]
    assert parse_duration_ms(f"{n}{unit}") == n * factor


@pytest.mark.parametrize(
    ("call", "option", "value"),
    [
        (lambda o: o.integer("maxOffsetsPerTrigger", None, minimum=1), "maxOffsetsPerTrigger", "0"),
        (lambda o: o.boolean("failOnDataLoss", True), "failOnDataLoss", "maybe"),
        (lambda o: o.duration_ms("watermark.lag", 0), "watermark.lag", "ten seconds"),
        (lambda o: o.choice("mode", "exactly-once", ["exactly-once", "idempotent"]), "mode", "twice"),
    ],
)
def test_bad_values_name_option_value_and_accepted(call, option, value):
    raw = {"maxOffsetsPerTrigger": "0", "failOnDataLoss": "maybe", "watermark.lag": "ten seconds",
           "mode": "twice"}
    opts = Options({option: raw[option]})
    with pytest.raises(OptionError) as info:
        call(opts)
    message = str(info.value)
    assert option in message and repr(value) in message and "accepted" in message
    assert isinstance(info.value, JetsparkError)


def test_choice_lists_accepted_values():
    with pytest.raises(OptionError, match=r"exactly-once \| idempotent"):
        Options({"mode": "twice"}).choice("mode", "exactly-once", ["exactly-once", "idempotent"])


def test_unknown_option_is_rejected_with_known_list():
    opts = Options({"subscribe": "t", "kafka.acks": "all", "subscibe": "typo"})
    with pytest.raises(OptionError) as info:
        opts.reject_unknown({"subscribe", "assign"}, prefixes=("kafka.",))
    assert "'subscibe'" in str(info.value) and "subscribe" in str(info.value)
    assert "kafka.*" in str(info.value)


def test_required_string():
    with pytest.raises(OptionError, match="required"):
        Options({}).string("walLocation", required=True)
