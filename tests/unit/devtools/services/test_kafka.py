"""The local Kafka node's storage formatting: cluster ids the storage tool accepts."""

from __future__ import annotations

import uuid

from jetspark.devtools.services import kafka


def test_cluster_id_never_starts_with_a_dash(monkeypatch) -> None:
    # 0xF8 encodes to "-" in URL-safe base64: the storage tool would take that id for an option
    drawn = iter([uuid.UUID(bytes=b"\xf8" + b"\x00" * 15), uuid.UUID(bytes=b"\x01" * 16)])
    monkeypatch.setattr(kafka.uuid, "uuid4", lambda: next(drawn))
    cluster_id = kafka.new_cluster_id()
    assert cluster_id == "AQEBAQEBAQEBAQEBAQEBAQ"


def test_cluster_ids_are_22_url_safe_characters() -> None:
    for _ in range(200):
        cluster_id = kafka.new_cluster_id()
        assert len(cluster_id) == 22 and not cluster_id.startswith("-")
