"""librdkafka settings that load or run code are refused by name, in the source and the sink."""

from __future__ import annotations

import pytest

from jetspark.datasources.kafka.options import KafkaSourceOptions
from jetspark.errors import OptionError
from jetspark.sinks.kafka.options import KafkaSinkOptions

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


@pytest.mark.parametrize("setting", ["plugin.library.paths", "ssl.engine.location", "ssl.providers",
                                     "sasl.kerberos.kinit.cmd", "Plugin.Library.Paths"])
@pytest.mark.parametrize("side", ["source", "sink"])
def test_settings_that_load_or_run_code_are_refused(setting, side):
    raw = {**BASE, f"kafka.{setting}": "/tmp/evil.so"}
    with pytest.raises(OptionError) as e:
        if side == "source":
            KafkaSourceOptions.parse({**raw, "subscribe": "t"}, streaming=True)
        else:
            KafkaSinkOptions.parse({**raw, "topic": "t", "guarantee": "at-least-once"})
    text = str(e.value)
    assert f"kafka.{setting}" in text and "not settable" in text and "Spark processes" in text
