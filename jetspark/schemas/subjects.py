"""Subject names: under which subject of the registry a topic's key or value schema lives
(Confluent's subject name strategies)."""

from __future__ import annotations

from jetspark.errors import OptionError

#: ``topic``: ``<topic>-key`` / ``<topic>-value`` (TopicNameStrategy, the default);
#: ``record``: the record's full name (RecordNameStrategy); ``topic-record``:
#: ``<topic>-<record full name>`` (TopicRecordNameStrategy).
STRATEGIES = ("topic", "record", "topic-record")


def subject_name(strategy: str, topic: str, *, is_key: bool, record_name: str | None = None,
                 option: str = "value.subject.strategy") -> str:
    """The subject of ``topic``'s key (``is_key``) or value schema under ``strategy``."""
    if strategy == "topic":
        return f"{topic}-{'key' if is_key else 'value'}"
    if strategy not in STRATEGIES:
        raise OptionError(option, strategy, " or ".join(STRATEGIES))
    if not record_name:
        raise OptionError(option, strategy, "topic, unless the record's full name is given "
                          f"({option.rsplit('.', 1)[0]}.record)")
    return record_name if strategy == "record" else f"{topic}-{record_name}"
