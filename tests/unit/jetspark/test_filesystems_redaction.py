"""A URI's secret never shows in open_location's error, even split by an unencoded ``&``."""

from __future__ import annotations

import pytest

from jetspark.errors import OptionError
from jetspark.filesystems import open_location


@pytest.mark.parametrize("uri", [
    "s3://bucket/wal?access_key=AKIAEXAMPLE&secret_key=abc&defSECRETTAIL",
    "s3://bucket/wal?access_key=AKIAEXAMPLE&secret_key=abc&defSECRETTAIL&region=us-east-1",
    "s3a://bucket/wal?secret_key=abc&defSECRETTAIL=xyzSECRETTAIL2",
])
def test_an_unencoded_ampersand_in_a_secret_shows_none_of_it(uri):
    with pytest.raises(OptionError) as e:
        open_location(uri)
    text = str(e.value)
    assert "SECRETTAIL" not in text and "abc" not in text, text
    assert "walLocation" in text and "%26" in text


def test_a_bad_uri_without_a_secret_tail_keeps_pyarrow_s_reason():
    with pytest.raises(OptionError, match="Unexpected query parameter") as e:
        open_location("s3://bucket/wal?nonsense=1")
    assert "nonsense" in str(e.value)
