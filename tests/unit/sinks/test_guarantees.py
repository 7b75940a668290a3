"""The sink words (guarantee × commit): one meaning in every format, refusals that name the accepted words."""

from __future__ import annotations

import pytest

from jetspark.errors import OptionError
from jetspark.sinks.guarantees import COMMITS, GIVES, GUARANTEES
from jetspark.sinks.jdbc.options import JdbcSinkOptions
from jetspark.sinks.kafka.options import KafkaSinkOptions

JDBC = (JdbcSinkOptions.parse, {"url": "postgresql://u@h:5432/db", "table": "events", "keys": "id"})
KAFKA = (KafkaSinkOptions.parse, {"kafka.bootstrap.servers": "h:9092", "topic": "out"})
FORMATS = {"jetjdbc": JDBC, "jetkafka": KAFKA}


def _parse(fmt: str, **options: str):
    parse, base = FORMATS[fmt]
    return parse({**base, **options})


def _error(fmt: str, **options: str) -> OptionError:
    with pytest.raises(OptionError) as e:
        _parse(fmt, **options)
    return e.value


@pytest.mark.parametrize("commit, gives", [
    ("two-phase", "exactly-once"), ("task", "exactly-once"), ("upsert", "exactly-once"),
    ("none", "at-least-once"),
])
def test_each_commit_is_accepted_with_exactly_one_guarantee(commit, gives):
    o = _parse("jetjdbc", guarantee=gives, commit=commit)
    assert (o.guarantee, o.commit) == (gives, commit)
    other = next(g for g in ("exactly-once", "at-least-once") if g != gives)
    e = _error("jetjdbc", guarantee=other, commit=commit)
    assert e.option == "commit" and f"(commit={commit} gives {gives})" in e.accepted


@pytest.mark.parametrize("fmt, guarantee, commit", [
    ("jetjdbc", "exactly-once", "two-phase"),
    ("jetjdbc", "at-least-once", "none"),
    ("jetkafka", "exactly-once", "task"),
    ("jetkafka", "at-least-once", "none"),
])
def test_defaults_follow_the_guarantee(fmt, guarantee, commit):
    o = _parse(fmt, guarantee=guarantee)
    assert (o.guarantee, o.commit) == (guarantee, commit)
    assert o == _parse(fmt, guarantee=guarantee, commit=commit)
    if guarantee == "exactly-once":
        assert _parse(fmt) == o


@pytest.mark.parametrize("fmt, accepted", [
    ("jetjdbc", ("two-phase", "task", "upsert", "none")),
    ("jetkafka", ("task", "none")),
])
def test_each_format_takes_its_commits_with_their_guarantee_only(fmt, accepted):
    for commit in COMMITS:
        for guarantee in GUARANTEES:
            if commit in accepted and GIVES[commit] == guarantee:
                o = _parse(fmt, guarantee=guarantee, commit=commit.upper())  # words are case-insensitive
                assert (o.guarantee, o.commit) == (guarantee, commit)
                continue
            e = _error(fmt, guarantee=guarantee, commit=commit)
            assert e.option == "commit"
            assert f"{fmt} accepts guarantee=exactly-once with commit=" in e.accepted
            assert "guarantee=at-least-once with commit=none" in e.accepted


def test_jetkafka_refuses_two_phase_and_upsert_naming_why_and_what_it_accepts():
    e = _error("jetkafka", commit="two-phase")
    assert e.accepted.startswith("task | none (jetkafka cannot do commit=two-phase")
    assert "KIP-939" in e.accepted
    e = _error("jetkafka", commit="upsert")
    assert e.accepted.startswith("task | none (jetkafka cannot do commit=upsert")


def test_a_wrong_pair_names_the_pairs():
    e = _error("jetjdbc", guarantee="at-least-once", commit="two-phase")
    assert e.accepted.startswith(
        "with guarantee=at-least-once only commit=none (commit=two-phase gives exactly-once)")
    assert e.accepted.endswith(
        "jetjdbc accepts guarantee=exactly-once with commit=two-phase | task | upsert, "
        "or guarantee=at-least-once with commit=none")


@pytest.mark.parametrize("fmt, mode, replacement", [
    ("jetjdbc", "exactly-once", "guarantee=exactly-once with commit=two-phase"),
    ("jetjdbc", "Transactional", "guarantee=exactly-once with commit=task"),
    ("jetjdbc", "idempotent", "guarantee=exactly-once with commit=upsert (and option 'keys')"),
    ("jetjdbc", "at-least-once", "guarantee=at-least-once with commit=none"),
    ("jetkafka", "exactly-once", "guarantee=exactly-once with commit=task"),
    ("jetkafka", "transactional", "guarantee=exactly-once with commit=task"),
    ("jetkafka", "idempotent", "guarantee=at-least-once with commit=none"),
    ("jetkafka", "at-least-once", "guarantee=at-least-once with commit=none"),
])
def test_the_old_option_mode_names_its_replacement(fmt, mode, replacement):
    e = _error(fmt, mode=mode, guarantee="exactly-once")
    assert e.option == "mode"
    assert f"option 'mode' is gone: mode={mode} is now {replacement};" in e.accepted
    assert "'guarantee' (exactly-once | at-least-once) and 'commit' (" in e.accepted


def test_an_unknown_old_word_still_names_the_new_options():
    e = _error("jetkafka", mode="once")
    assert "option 'mode' is gone: the options are 'guarantee'" in e.accepted and "commit=task" in e.accepted


@pytest.mark.parametrize("option, word", [
    ("commit", "two_phase"), ("commit", "2pc"), ("commit", "exactly-once"),
    ("guarantee", "exactly_once"), ("guarantee", "at-most-once"), ("guarantee", "task"),
])
def test_only_the_documented_words_are_accepted(option, word):
    e = _error("jetjdbc", **{option: word})
    assert e.option == option and e.value == word
    listed = "two-phase | task | upsert | none" if option == "commit" else "exactly-once"
    assert listed in e.accepted and "at-least-once" in e.accepted


def test_words_are_case_and_space_insensitive():
    o = _parse("jetjdbc", guarantee=" At-Least-Once ", commit=" NONE ")
    assert (o.guarantee, o.commit) == ("at-least-once", "none")


def test_readme_table_of_the_sink_words_matches_the_formats():
    from jetspark.sinks.jdbc.options import COMMITS as JDBC_COMMITS
    from jetspark.sinks.kafka.options import COMMITS as KAFKA_COMMITS
    from tests import readme

    table = readme.README.read_text().split("<!-- sink-words -->", 1)[1].strip().splitlines()
    rows = [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in table[2:]
            if line.startswith("|")]
    rows = rows[: next((i for i, line in enumerate(table[2:]) if not line.startswith("|")), len(rows))]
    assert [r[1].strip("`") for r in rows] == list(COMMITS)
    for guarantee, commit, _how, *cells in rows:
        word = commit.strip("`")
        assert guarantee.split()[0].strip("`") == GIVES[word]
        for sink, cell in zip((JDBC_COMMITS, KAFKA_COMMITS), cells, strict=True):
            assert cell.startswith("no") == (word not in sink.accepted), (sink.format, word)
            assert cell.startswith("default") == (sink.default(GIVES[word]) == word), (sink.format, word)
