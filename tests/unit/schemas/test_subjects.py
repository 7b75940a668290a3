from __future__ import annotations

import pytest

from jetspark.errors import OptionError
from jetspark.schemas.subjects import subject_name


def test_the_three_strategies():
    assert subject_name("topic", "orders", is_key=False) == "orders-value"
    assert subject_name("topic", "orders", is_key=True) == "orders-key"
    assert subject_name("record", "orders", is_key=False, record_name="shop.Order") == "shop.Order"
    assert (subject_name("topic-record", "orders", is_key=False, record_name="shop.Order")
            == "orders-shop.Order")


def test_a_record_strategy_without_a_record_name_and_an_unknown_one_name_the_option():
    with pytest.raises(OptionError, match=r"value\.subject\.strategy.*\(value\.subject\.record\)"):
        subject_name("record", "orders", is_key=False)
    with pytest.raises(OptionError, match="topic or record or topic-record"):
        subject_name("wire", "orders", is_key=False)
