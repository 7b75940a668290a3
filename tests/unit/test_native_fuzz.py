"""The native decoders (Avro, Protobuf, the Kafka reader) fuzzed in a build with
AddressSanitizer and UndefinedBehaviorSanitizer (tests/native_fuzz.py): a short run with a
fixed seed finds nothing, and a bug planted in the build is found, so a sanitizer report fails
the run. The long run with a random seed is tests/soak/test_native_fuzz_soak.py."""

from __future__ import annotations

from tests.native_fuzz import build, fuzz

EXAMPLES = 500  # about a minute on a loaded 2-core machine, the sanitized build included


def test_the_sanitized_decoders_find_nothing_in_random_and_mutated_input(tmp_path):
    report = fuzz(build(tmp_path), tmp_path, examples=EXAMPLES, seed=48)
    assert report == ""


def test_a_bug_planted_in_the_avro_decoder_is_reported(tmp_path):
    """Without the bounds check of a fixed-width read, mutated records read past their end."""
    check = "if ((size_t)(c->end - c->p) < n)"

    def plant(name: str, source: str) -> str:
        if name != "_avro_arrow":
            return source
        assert source.count(check) == 1
        return source.replace(check, "if (0)")

    report = fuzz(build(tmp_path, plant), tmp_path, examples=EXAMPLES, seed=48, kafka=False)
    assert "AddressSanitizer" in report and "_avro_arrow.c" in report
