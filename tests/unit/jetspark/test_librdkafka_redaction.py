"""librdkafka quotes pieces of a secret setting, not only whole values: its texts are shown
without any run of 4+ characters of a secret (``jetspark.redaction.scrub_fragments``)."""

from __future__ import annotations

import time

from confluent_kafka import Producer

from jetspark.redaction import scrub, scrub_fragments, secret_values
from jetspark.sinks.kafka.options import KafkaSinkOptions

CANARY = "Canary7f3a9b2c"


def _oauthbearer_refusal(config: str) -> str:
    """The error librdkafka reports for an unsecured-JWT ``sasl.oauthbearer.config`` it cannot
    parse (no broker needed: the token is made before any connection)."""
    errors: list[str] = []
    producer = Producer({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "sasl_plaintext",
                         "sasl.mechanism": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": "true",
                         "sasl.oauthbearer.config": config, "error_cb": lambda e: errors.append(str(e))})
    deadline = time.monotonic() + 30
    while not any("OAUTHBEARER" in e for e in errors) and time.monotonic() < deadline:
        producer.poll(0.2)
    found = [e for e in errors if "OAUTHBEARER" in e]
    assert found, errors
    return found[0]


def test_a_quoted_suffix_of_a_secret_is_masked():
    config = f"principal=admin extension_team=ops {CANARY}-rest"
    raw = _oauthbearer_refusal(config)
    assert f"{CANARY}-rest" in raw and config not in raw  # a suffix: replacing the whole value misses it
    secrets = secret_values({"sasl.oauthbearer.config": config})
    assert CANARY in scrub(raw, secrets)
    shown = scrub_fragments(raw, secrets)
    assert CANARY[:4] not in shown and "rest" not in shown, shown
    assert "Unrecognized sasl.oauthbearer.config beginning at: ***" in shown, shown
    # the jetkafka sink shows librdkafka's texts through this rule
    options = KafkaSinkOptions.parse({"topic": "t", "kafka.bootstrap.servers": "127.0.0.1:1",
                                      "kafka.sasl.oauthbearer.config": config})
    assert CANARY[:4] not in options.scrub(raw)


def test_pieces_shorter_than_four_characters_and_other_words_stay():
    shown = scrub_fragments("mechanism PLAIN failed for abc", ["xyzPLAI", "abc"])
    assert shown == "mechanism ***N failed for ***"
    assert scrub_fragments("no secret here", ["s3cr3t-value"]) == "no secret here"
    assert scrub_fragments("at: 3cr3t-val and s3c", ["s3cr3t-value"]) == "at: *** and s3c"
