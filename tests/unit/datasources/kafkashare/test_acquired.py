"""jetkafkashare's offset runs and offset sets (pure logic)."""

from __future__ import annotations

import numpy as np
import pytest

from jetspark.datasources.kafkashare.acquired import OffsetSet, count, from_runs, to_runs
from jetspark.datasources.kafkashare.options import ShareOptions
from jetspark.errors import OptionError


def test_runs_join_consecutive_offsets_of_one_delivery_count():
    offsets = np.array([7, 3, 4, 5, 9, 10], np.int64)
    counts = np.array([1, 1, 1, 2, 1, 1], np.int64)
    runs = to_runs(offsets, counts)
    assert runs == [[3, 5, 1], [5, 6, 2], [7, 8, 1], [9, 11, 1]]
    o, c = from_runs(runs)
    assert o.tolist() == [3, 4, 5, 7, 9, 10]
    assert c.tolist() == [1, 1, 2, 1, 1, 1]
    assert to_runs(np.empty(0, np.int64), np.empty(0, np.int64)) == []
    assert count({"t": {"0": runs}}) == 6


def test_offset_set_membership_removal_and_expiry():
    s = OffsetSet.of({"t": {"1": [[10, 13, 100]]}})
    s.add("t", 1, np.array([20]), np.array([200]))
    assert s.contains("t", 1, np.array([9, 10, 12, 13, 20])).tolist() == [False, True, True, False, True]
    assert not s.contains("t", 0, np.array([10])).any()
    s.remove("t", 1, np.array([11]))
    assert s.runs() == {"t": {"1": [[10, 11, 100], [12, 13, 100], [20, 21, 200]]}}
    s.drop_values_below(150)
    assert s.runs() == {"t": {"1": [[20, 21, 200]]}}
    s.drop_values_below(300)
    assert len(s) == 0 and s.runs() == {}


def test_an_offset_added_again_keeps_its_first_value():
    s = OffsetSet()
    s.add("t", 0, np.array([5]), np.array([1]))
    s.add("t", 0, np.array([5, 6]), np.array([9, 9]))
    assert s.runs() == {"t": {"0": [[5, 6, 1], [6, 7, 9]]}}


def test_options_need_a_share_group_and_refuse_what_the_source_owns():
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "a, b", "kafka.group.id": "g"}
    opts = ShareOptions.parse(base)
    assert opts.topics == ("a", "b") and opts.group == "g"
    assert opts.reader_kafka["group.id"] != "g"
    with pytest.raises(OptionError, match=r"kafka\.group\.id"):
        ShareOptions.parse({k: v for k, v in base.items() if k != "kafka.group.id"})
    with pytest.raises(OptionError, match=r"share\.acknowledgement\.mode"):
        ShareOptions.parse({**base, "kafka.share.acknowledgement.mode": "implicit"})
    with pytest.raises(OptionError, match="maxOffsetsPerTrigger"):
        ShareOptions.parse({**base, "maxOffsetsPerTrigger": "0"})
    with pytest.raises(OptionError, match="startingOffsets"):
        ShareOptions.parse({**base, "startingOffsets": "earliest"})
