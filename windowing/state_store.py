"""Changelog checkpointing of the RocksDB state store, when the user chose nothing.

Without it (Spark's default) every micro-batch's commit of each stateful task flushes
RocksDB, checkpoints it and uploads the new files to the checkpoint; with it, a commit
writes only the changes since the last commit to a changelog file and a background thread
takes snapshots now and then. On a live stream that commit is a large part of every
micro-batch, for Spark's own ``window()`` as for jetspark (``bench/bench_live.py``
attributes it: RocksDB's "file sync to external storage" and "zip files" phases).

So a streaming :func:`~jetspark.windowing.window_aggregate` on the RocksDB state store
(the one ``transformWithStateInPandas`` needs) whose session leaves
``spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled`` unset sets it to
true for the session and says so once with a :class:`ChangelogCheckpointingWarning`. A
value the user set is never changed, and over Spark Connect (whose client cannot tell an
unset value from a chosen false) the setting is only advised. Spark reads it when a query
starts, and moves an existing checkpoint between the two forms in either direction by itself,
so queries started before on the same checkpoint keep working (docs/how-to/live-latency.md).
"""

from __future__ import annotations

import warnings

from jetspark.windowing.partitions import set_by_user

CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


class ChangelogCheckpointingWarning(UserWarning):
    """jetspark switched on (or advises) RocksDB's changelog checkpointing for a streaming window."""


def choose_changelog_checkpointing(spark, state_api: str | None) -> bool:
    """Switch on RocksDB's changelog checkpointing for the session when the query's state store
    is RocksDB and nobody set the option; True when it was switched on here. ``state_api``:
    the Python engine's (``transformWithStateInPandas`` runs on RocksDB only), None on the
    native engine (the session's provider decides)."""
    provider = spark.conf.get(PROVIDER, None) or ""
    if state_api == "transformWithStateInPandas":
        provider = provider or ROCKSDB
    if not provider.endswith("RocksDBStateStoreProvider"):
        return False
    chosen = set_by_user(spark, CHANGELOG)
    if chosen:
        return False
    if chosen is None:
        if (spark.conf.get(CHANGELOG, "false") or "false").lower() != "true":
            _warn(f"{CHANGELOG} is not true", f"Set {CHANGELOG}=true before the query starts")
        return False
    spark.conf.set(CHANGELOG, "true")
    _warn(f"{CHANGELOG} was unset; jetspark set it to true for this session, so for its later "
          "queries too", f"Set {CHANGELOG} yourself to choose otherwise")
    return True


def _warn(what: str, advice: str) -> None:
    warnings.warn(
        f"{what}. Without RocksDB's changelog checkpointing every stateful task uploads a "
        f"checkpoint of its state store each micro-batch, a large part of a live micro-batch. "
        f"{advice} (docs/how-to/live-latency.md).",
        ChangelogCheckpointingWarning,
        stacklevel=4,
    )
