"""The one compiled part of jetspark: librdkafka → Arrow buffers for the jetkafka source.

Metadata lives in pyproject.toml; setuptools merges this file's ``ext_modules`` into it.
Needs librdkafka's headers and library (Debian: ``librdkafka-dev``, see scripts/bootstrap.sh).
Without them the extension is skipped (``JETSPARK_REQUIRE_NATIVE=1`` makes that an error)
and jetkafka reads through confluent-kafka instead.
"""

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """Build the extension when librdkafka is there; otherwise warn and go on without it."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # compiler or headers missing
            self._skip(e)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as e:
            self._skip(e)

    def _skip(self, error: Exception) -> None:
        if os.environ.get("JETSPARK_REQUIRE_NATIVE") == "1":
            raise error
        if getattr(self, "_warned", False):  # an editable install then fails to copy it, too
            return
        self._warned = True
        print(f"WARNING: jetspark's native Kafka reader was not built ({error}); "
              "jetkafka falls back to confluent-kafka. Install librdkafka-dev to build it.")


setup(
    ext_modules=[
        Extension(
            "jetspark.datasources._kafka_arrow",
            sources=["datasources/_kafka_arrow.c"],
            libraries=["rdkafka"],
            extra_compile_args=["-O2", "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Wextra",
                                "-Wno-missing-field-initializers", "-Wno-cast-function-type"],
        )
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
