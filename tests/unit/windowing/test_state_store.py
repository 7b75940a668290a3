"""RocksDB changelog checkpointing switched on for a streaming window when nobody chose (pure
logic: a stand-in session; the real session's path runs in every streaming window test)."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest

from jetspark.windowing import ChangelogCheckpointingWarning
from jetspark.windowing.state_store import CHANGELOG, PROVIDER, ROCKSDB, choose_changelog_checkpointing

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
TWS, AIPWS = "transformWithStateInPandas", "applyInPandasWithState"


class _Conf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = dict(values)

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def contains(self, key: str) -> bool:
        return key in self.values


def _session(values: dict[str, str]):
    conf = _Conf(values)
    jvm_state = SimpleNamespace(conf=lambda: conf)
    return SimpleNamespace(conf=conf, _jsparkSession=SimpleNamespace(sessionState=lambda: jvm_state))


@pytest.mark.parametrize("values, api", [({PROVIDER: ROCKSDB}, TWS), ({}, TWS), ({PROVIDER: ROCKSDB}, AIPWS),
                                         ({PROVIDER: ROCKSDB}, None)])
def test_unset_on_rocksdb_is_switched_on_with_a_warning(values, api) -> None:
    spark = _session(values)
    with pytest.warns(ChangelogCheckpointingWarning, match="jetspark set it to true"):
        assert choose_changelog_checkpointing(spark, api)
    assert spark.conf.values[CHANGELOG] == "true"


@pytest.mark.parametrize("values, api", [
    ({PROVIDER: ROCKSDB, CHANGELOG: "false"}, TWS),  # the user's choice
    ({PROVIDER: ROCKSDB, CHANGELOG: "true"}, TWS),
    ({PROVIDER: HDFS}, AIPWS),  # no RocksDB: nothing to switch
    ({}, AIPWS),  # Spark's default provider is HDFS
    ({}, None),
])
def test_a_choice_or_another_store_is_left_alone_silently(values, api) -> None:
    spark = _session(values)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ChangelogCheckpointingWarning)
        assert not choose_changelog_checkpointing(spark, api)
    assert spark.conf.values == values


def test_over_spark_connect_it_is_only_advised() -> None:
    connect_session = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})()
    connect_session.conf = _Conf({PROVIDER: ROCKSDB})
    with pytest.warns(ChangelogCheckpointingWarning, match=f"Set {CHANGELOG}=true before"):
        assert not choose_changelog_checkpointing(connect_session, TWS)
    assert CHANGELOG not in connect_session.conf.values


@pytest.mark.parametrize("asked, early, chosen", [(None, False, AIPWS), (None, True, TWS), (TWS, False, TWS),
                                                  (AIPWS, True, AIPWS)])
def test_the_state_api_is_the_one_asked_for_else_aipws_or_tws_with_early_results(asked, early, chosen):
    from jetspark.windowing.api import chosen_state_api

    assert chosen_state_api(asked, early) == chosen


def test_an_unknown_state_api_is_refused_naming_the_choices() -> None:
    from jetspark.errors import JetsparkError
    from jetspark.windowing.api import chosen_state_api

    with pytest.raises(JetsparkError, match=r"state_api must be one of.*applyInPandasWithState.*'mapGroups'"):
        chosen_state_api("mapGroups", False)
