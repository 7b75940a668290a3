"""The stateful-partitions choice on masters other than local (pure logic: a stand-in session;
the local and Connect paths run on real Spark in tests/integration)."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest

from jetspark.windowing import StatefulPartitionsWarning
from jetspark.windowing.partitions import SHUFFLE_PARTITIONS, choose_stateful_partitions


class _Conf:
    def __init__(self, value: str | None) -> None:
        self.values = {} if value is None else {SHUFFLE_PARTITIONS: value}
        self.set_calls: list[tuple[str, str]] = []

    def get(self, key: str) -> str:
        return self.values.get(key, "200")

    def set(self, key: str, value: str) -> None:
        self.set_calls.append((key, value))

    def contains(self, key: str) -> bool:
        return key in self.values


def _session(master: str, value: str | None):
    """A classic session's surface as choose_stateful_partitions reads it."""
    conf = _Conf(value)
    jvm_state = SimpleNamespace(conf=lambda: conf)
    return SimpleNamespace(
        conf=conf,
        _jsparkSession=SimpleNamespace(sessionState=lambda: jvm_state),
        sparkContext=SimpleNamespace(master=master, defaultParallelism=8),
    )


@pytest.mark.parametrize("master", ["spark://master:7077", "yarn", "k8s://https://api:6443"])
def test_a_cluster_session_at_spark_default_gets_advice_and_keeps_its_setting(master: str) -> None:
    spark = _session(master, None)
    with pytest.warns(StatefulPartitionsWarning, match="Set it to about the cores"):
        assert choose_stateful_partitions(spark) is None
    assert spark.conf.set_calls == []


def test_a_cluster_session_with_a_chosen_value_is_left_alone_silently() -> None:
    spark = _session("spark://master:7077", "12")
    with warnings.catch_warnings():
        warnings.simplefilter("error", StatefulPartitionsWarning)
        assert choose_stateful_partitions(spark) is None
    assert spark.conf.set_calls == []


def test_a_local_session_at_spark_default_gets_the_default_parallelism() -> None:
    spark = _session("local[8]", None)
    with pytest.warns(StatefulPartitionsWarning, match="jetspark set it to 8 "):
        assert choose_stateful_partitions(spark) == 8
    assert spark.conf.set_calls == [(SHUFFLE_PARTITIONS, "8")]
