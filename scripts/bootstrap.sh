#!/usr/bin/env bash
# Set up what jetspark's tests, demo or docs need, installing only what is missing for that:
#
#   scripts/bootstrap.sh [test|demo|docs]     (default: test, everything the test suite needs)
#
#   - a virtual environment .venv with jetspark installed (editable) and the extras the target
#     needs (test: test, demo, docs; demo: demo; docs: docs)
#   - system packages, only when missing, via apt-get (root or sudo needed only then):
#       test  Java, Maven, PostgreSQL, RabbitMQ, a C compiler and Python's headers: the suite
#             starts servers of its own (TLS, faults, the local services' tests) even when the
#             JETSPARK_* variables name shared ones, and compares with Spark's own connectors
#             (Maven jars)
#       demo  Java (Spark) and the C compiler when it can be had; Kafka (Maven jars) only
#             without JETSPARK_KAFKA_BOOTSTRAP, PostgreSQL only without JETSPARK_PG_DSN: with
#             services given by the JETSPARK_* variables (docker compose, or your own) no
#             service package is installed and no root is needed for them
#       docs  none
#   - Apache Kafka's jars from Maven Central (cached under ~/.cache/jetspark), when a local
#     Kafka may be started; for test, also Apicurio Registry's server (the Schema Registry
#     some tests start; it runs on the same Java 17)
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET=${1:-test}
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}

say() { printf '[bootstrap] %s\n' "$*"; }
die() { printf '[bootstrap] ERROR: %s\n' "$*" >&2; exit 1; }

case "$TARGET" in
  test) EXTRAS="test,demo,docs" ;;
  demo) EXTRAS="demo" ;;
  docs) EXTRAS="docs" ;;
  *) die "unknown target '$TARGET'; accepted: test, demo, docs" ;;
esac

"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || die "$PYTHON is $("$PYTHON" --version 2>&1); jetspark needs Python >= 3.11 (set PYTHON=...)"

# --- system packages --------------------------------------------------------------
has_python_headers() {
  "$PYTHON" -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))'
}
required=()   # the target cannot run without them
optional=()   # installed when root or sudo is at hand, else skipped with a warning
need_java=0; need_kafka=0
case "$TARGET" in
  test)
    need_java=1; need_kafka=1
    command -v mvn >/dev/null || required+=(maven)
    compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || required+=(postgresql)
    [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || required+=(rabbitmq-server)
    # jetkafka's native reader (datasources/kafka/_kafka_arrow.c) is compiled by pip install; it
    # needs no librdkafka package: it runs on the librdkafka bundled with confluent-kafka
    command -v gcc >/dev/null || required+=(gcc)
    has_python_headers || required+=(python3-dev)
    ;;
  demo)
    need_java=1
    if [ -z "${JETSPARK_KAFKA_BOOTSTRAP:-}" ]; then
      need_kafka=1
      command -v mvn >/dev/null || required+=(maven)
    fi
    if [ -z "${JETSPARK_PG_DSN:-}" ]; then
      compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || required+=(postgresql)
    fi
    command -v gcc >/dev/null || optional+=(gcc)
    has_python_headers || optional+=(python3-dev)
    ;;
esac
if [ "$need_java" -eq 1 ] && ! command -v java >/dev/null; then required+=(openjdk-17-jre-headless); fi

SUDO=none
if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; fi
if [ ${#optional[@]} -gt 0 ] && [ "$SUDO" = none ]; then
  say "WARNING: not installing ${optional[*]} (no root or sudo): jetkafka reads through confluent-kafka, more slowly"
  optional=()
fi
missing=("${required[@]}" "${optional[@]}")
if [ ${#missing[@]} -gt 0 ]; then
  [ "$SUDO" = none ] && die "missing system packages for '$TARGET': ${missing[*]}; install them (apt-get install ${missing[*]}) or run as root"
  say "installing system packages for '$TARGET': ${missing[*]}"
  $SUDO apt-get update -qq || die "apt-get update failed"
  # the log in a file of our own (mktemp: a new name, 0600), not a fixed name in the shared temp
  # folder, where another user's link would have the install write through it
  apt_log=$(mktemp "${TMPDIR:-/tmp}/jetspark-apt.XXXXXX") || die "cannot create a log file for apt-get"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    >"$apt_log" 2>&1 || { tail -n 30 "$apt_log" >&2; die "apt-get install ${missing[*]} failed (log: $apt_log)"; }
  rm -f "$apt_log"
fi
if [ "$need_java" -eq 1 ]; then
  java -version 2>&1 | grep -qE 'version "(1[7-9]|2[0-9])' || die "Java 17+ is required: $(java -version 2>&1 | head -n1)"
fi

# --- Python environment -----------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
  say "creating virtual environment $VENV"
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.jetspark-installed"
native_ok() { "$VENV/bin/python" -c 'import sys, jetspark.datasources.kafka.native as k, jetspark.schemas._avro_arrow, jetspark.schemas._protobuf_arrow; sys.exit(not k.AVAILABLE)' 2>/dev/null; }
# the native reader is required where a compiler is (always for the test suite)
require_native=0
if [ "$TARGET" = test ] || { command -v gcc >/dev/null && has_python_headers; }; then require_native=1; fi
# the extras installed so far, one per line in the stamp: reinstall when this target needs another
extras_ok() { [ -f "$stamp" ] && for e in ${EXTRAS//,/ }; do grep -qx "$e" "$stamp" || return 1; done; }
if ! extras_ok || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ] \
   || [ datasources/kafka/_kafka_arrow.c -nt "$stamp" ] || [ datasources/kafka/_rdkafka_api.h -nt "$stamp" ] \
   || [ jetspark/schemas/_avro_arrow.c -nt "$stamp" ] || [ jetspark/schemas/_protobuf_arrow.c -nt "$stamp" ] || [ native/growable_buffer.h -nt "$stamp" ] || [ native/record_columns.h -nt "$stamp" ] \
   || { [ "$require_native" -eq 1 ] && ! native_ok; }; then
  installed=$(cat "$stamp" 2>/dev/null | paste -sd, - || true)
  all=$(printf '%s\n' ${EXTRAS//,/ } ${installed//,/ } | sort -u | paste -sd, -)
  say "installing jetspark[$all] into $VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # with gcc and Python's headers a native reader that does not build is an error here
  JETSPARK_REQUIRE_NATIVE=$require_native "$VENV/bin/python" -m pip install -q -e ".[$all]"
  if [ "$require_native" -eq 1 ]; then
    native_ok || die "jetkafka's native reader does not load: $("$VENV/bin/python" -c \
      'import jetspark.datasources.kafka.native as k; print(k.IMPORT_ERROR)' 2>&1 | tail -n 1)"
  fi
  printf '%s\n' ${all//,/ } > "$stamp"
fi
# PySpark auto-registers formats by listing top-level modules (pkgutil.iter_modules), which
# cannot see modules behind setuptools' editable import hook. A wheel install puts the
# pyspark_jet* modules in site-packages; for this editable one, put formats/ on the path.
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$PWD/formats" > "$site/jetspark-formats-editable.pth"

# --- Kafka jars (and Apicurio Registry's server) ----------------------------------
if [ "$need_kafka" -eq 1 ]; then
  "$VENV/bin/jetspark" services fetch
fi
if [ "$TARGET" = test ]; then
  "$VENV/bin/jetspark" services fetch registry
fi
say "ready for '$TARGET'"
