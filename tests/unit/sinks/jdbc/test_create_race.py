"""Two tasks creating the same table at once: PostgreSQL gives the loser one of three errors,
depending on where the two meet in the catalog; each means "someone else created it"."""

from __future__ import annotations

import pytest
from psycopg import errors, sql

from jetspark.sinks.jdbc.target import _create_quietly


class _Loser:
    def __init__(self, error: type[Exception]) -> None:
        self.error = error

    def execute(self, statement):
        raise self.error("the other task created it first")


@pytest.mark.parametrize("error", [errors.UniqueViolation, errors.DuplicateTable, errors.DuplicateObject])
def test_the_loser_of_a_create_race_goes_on(error) -> None:
    _create_quietly(_Loser(error), sql.SQL("CREATE TABLE IF NOT EXISTS t (x int)"))


def test_other_errors_still_fail() -> None:
    with pytest.raises(errors.InsufficientPrivilege):
        _create_quietly(_Loser(errors.InsufficientPrivilege), sql.SQL("CREATE TABLE IF NOT EXISTS t (x int)"))
