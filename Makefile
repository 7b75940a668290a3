# The two commands of the README: `make demo` and `make test`. Both set up a fresh
# machine first (scripts/bootstrap.sh: apt packages, .venv, Kafka jars).
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: bootstrap test soak demo demo-cluster lint services-up services-env services-down bench

bootstrap:
	bash scripts/bootstrap.sh

test: bootstrap
	$(BIN)/ruff check .
	$(BIN)/pytest $(PYTEST_ARGS)

# Long runs, not part of `make test`: tests marked soak (production scale), and the
# two-driver tests repeated (SOAK_REPEAT times; make test runs each once).
SOAK_REPEAT ?= 5
soak: bootstrap
	$(BIN)/pytest -m soak tests/soak $(PYTEST_ARGS)
	for i in $$(seq $(SOAK_REPEAT)); do $(BIN)/pytest -q tests/integration/test_two_drivers.py $(PYTEST_ARGS) || exit 1; done

demo: bootstrap
	$(BIN)/jetspark demo $(DEMO_ARGS)

# The demo submitted to a local standalone cluster (master + 2 workers); services stay up
# afterwards (`make services-down` stops them).
demo-cluster: bootstrap
	$(BIN)/jetspark services up kafka postgres spark
	eval "$$($(BIN)/jetspark services env)" && PYSPARK_PYTHON=$(abspath $(BIN))/python \
	  $(BIN)/spark-submit --master "$$JETSPARK_SPARK_MASTER" scripts/jetspark_demo.py --external $(DEMO_ARGS)

lint: bootstrap
	$(BIN)/ruff check .

services-up: bootstrap
	$(BIN)/jetspark services up

services-env:
	$(BIN)/jetspark services env

services-down:
	$(BIN)/jetspark services down
