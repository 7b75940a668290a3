"""The sanitized fuzz run of the native decoders (tests/native_fuzz.py) at length, with a
random seed: 20,000 Avro and Protobuf batches and 400 batches of Kafka records."""

from __future__ import annotations

import pytest

from tests.native_fuzz import build, fuzz


@pytest.mark.soak
def test_the_sanitized_decoders_find_nothing_in_a_long_run(tmp_path):
    assert fuzz(build(tmp_path), tmp_path, examples=20_000, seed=None) == ""
