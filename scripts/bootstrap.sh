#!/usr/bin/env bash
# Set up everything jetspark's tests and demo need on a fresh Debian machine:
#   - system packages when missing (Java, Maven, PostgreSQL, RabbitMQ, a C compiler and
#     Python's headers for jetkafka's native reader) via apt-get
#   - a virtual environment .venv with jetspark installed (editable) and its test deps
#   - Apache Kafka's jars from Maven Central (cached under ~/.cache/jetspark)
# Idempotent: a second run only checks. Needs root (or sudo) only to install packages.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}

say() { printf '[bootstrap] %s\n' "$*"; }
die() { printf '[bootstrap] ERROR: %s\n' "$*" >&2; exit 1; }

"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
  || die "$PYTHON is $("$PYTHON" --version 2>&1); jetspark needs Python >= 3.11 (set PYTHON=...)"

# --- system packages --------------------------------------------------------------
missing=()
command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || missing+=(maven)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
[ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || missing+=(rabbitmq-server)
# jetkafka's native reader (datasources/kafka/_kafka_arrow.c) is compiled by pip install; it needs
# no librdkafka package: it runs on the librdkafka bundled with confluent-kafka
command -v gcc >/dev/null || missing+=(gcc)
"$PYTHON" -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))' \
  || missing+=(python3-dev)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
    die "missing system packages: ${missing[*]}; install them (apt-get install ${missing[*]}) or run as root"
  fi
  say "installing system packages: ${missing[*]}"
  $SUDO apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    >/tmp/jetspark-apt.log 2>&1 || { tail -n 30 /tmp/jetspark-apt.log >&2; die "apt-get install ${missing[*]} failed"; }
fi
java -version 2>&1 | grep -qE 'version "(1[7-9]|2[0-9])' || die "Java 17+ is required: $(java -version 2>&1 | head -n1)"

# --- Python environment -----------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
  say "creating virtual environment $VENV"
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.jetspark-installed"
native_ok() { "$VENV/bin/python" -c 'import sys, jetspark.datasources.kafka.native as k; sys.exit(not k.AVAILABLE)' 2>/dev/null; }
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ setup.py -nt "$stamp" ] \
   || [ datasources/kafka/_kafka_arrow.c -nt "$stamp" ] || [ datasources/kafka/_rdkafka_api.h -nt "$stamp" ] \
   || ! native_ok; then
  say "installing jetspark and its dependencies into $VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # gcc and Python's headers are checked above: a native reader that does not build is an error here
  JETSPARK_REQUIRE_NATIVE=1 "$VENV/bin/python" -m pip install -q -e ".[test,demo]"
  native_ok || die "jetkafka's native reader does not load: $("$VENV/bin/python" -c \
    'import jetspark.datasources.kafka.native as k; print(k.IMPORT_ERROR)' 2>&1 | tail -n 1)"
  touch "$stamp"
fi
# PySpark auto-registers formats by listing top-level modules (pkgutil.iter_modules), which
# cannot see modules behind setuptools' editable import hook. A wheel install puts the
# pyspark_jet* modules in site-packages; for this editable one, put formats/ on the path.
site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$PWD/formats" > "$site/jetspark-formats-editable.pth"

# --- Kafka jars -------------------------------------------------------------------
"$VENV/bin/jetspark" services fetch
say "ready"
