"""The compiled parts of jetspark: librdkafka → Arrow buffers for the jetkafka source, and
Avro binary → Arrow buffers for Schema Registry formats.

Metadata lives in pyproject.toml; setuptools merges this file's ``ext_modules`` into it.
Builds with a C compiler and Python's headers only: librdkafka is neither included nor linked
(datasources/kafka/_rdkafka_api.h declares the part of its API the reader uses; both
extensions build their Arrow buffers with native/growable_buffer.h); at import the
extension uses the librdkafka that confluent-kafka bundles (docs/design.md, "Native Kafka
reader: one librdkafka"). Without a compiler the extension is skipped with one warning
(``JETSPARK_REQUIRE_NATIVE=1`` makes that an error) and jetkafka reads through
confluent-kafka instead, which is slower.
"""

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """Build the extension when a C compiler is there; otherwise warn and go on without it."""

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
        print(f"WARNING: jetspark's native parts were not built ({error}); jetkafka falls back to "
              "confluent-kafka (slower) and cannot decode Avro. Building them needs a C compiler and "
              "Python's headers (Debian: gcc python3-dev).")


setup(
    ext_modules=[
        Extension(
            "jetspark.datasources.kafka._kafka_arrow",
            sources=["datasources/kafka/_kafka_arrow.c"],
            depends=["datasources/kafka/_rdkafka_api.h", "native/growable_buffer.h"],
            include_dirs=["native"],
            libraries=["dl"],  # dlopen/dlsym (part of libc since glibc 2.34; -ldl is then a stub)
            extra_compile_args=["-O2", "-std=c11", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Wextra",
                                "-Wno-missing-field-initializers", "-Wno-cast-function-type"],
        ),
        Extension(
            "jetspark.schemas._avro_arrow",
            sources=["jetspark/schemas/_avro_arrow.c"],
            depends=["native/growable_buffer.h", "native/record_columns.h"],
            include_dirs=["native"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-missing-field-initializers"],
        ),
        Extension(
            "jetspark.schemas._protobuf_arrow",
            sources=["jetspark/schemas/_protobuf_arrow.c"],
            depends=["native/growable_buffer.h", "native/record_columns.h"],
            include_dirs=["native"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-missing-field-initializers"],
        ),
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
