# The two commands of the README: `make demo` and `make test`. Both set up a fresh
# machine first with what they need and is missing (scripts/bootstrap.sh TARGET: apt packages,
# .venv, Kafka jars; with services given by the JETSPARK_* variables, `make demo` installs no
# service package). `make docs` builds the documentation site into site/.
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: bootstrap bootstrap-demo bootstrap-docs test soak soak-round demo demo-cluster docs docs-generated lint services-up \
	services-env services-down bench

bootstrap:
	bash scripts/bootstrap.sh test

bootstrap-demo:
	bash scripts/bootstrap.sh demo

bootstrap-docs:
	bash scripts/bootstrap.sh docs

test: bootstrap
	$(BIN)/ruff check .
	$(BIN)/pytest $(PYTEST_ARGS)

# Every soak case (make test runs one slice of them a submission, tests/soak_slices.py): the crash
# points, repeated, and the production-scale runs (soak_only), in tests/soak and
# tests/integration; then the two-driver tests repeated (SOAK_REPEAT times). Every run goes on
# after a failure; the dated report, reports/soak-YYYY-MM-DD.md (scripts/soak_report.py), lists
# each case's outcome and duration, the commit and the load average, and the target fails
# when any run failed.
SOAK_REPEAT ?= 5
SOAK_DAY := $(shell date -u +%F)
SOAK_XML := reports/soak-$(SOAK_DAY)
soak: bootstrap
	mkdir -p $(SOAK_XML)
	rc=0; \
	$(BIN)/pytest -m soak tests/soak tests/integration --junitxml=$(SOAK_XML)/soak.xml $(PYTEST_ARGS) || rc=1; \
	for i in $$(seq $(SOAK_REPEAT)); do \
	  $(BIN)/pytest -q -m 'soak or not soak' tests/integration/test_two_drivers.py \
	    --junitxml=$(SOAK_XML)/two-drivers-$$i.xml $(PYTEST_ARGS) || rc=1; \
	done; \
	$(BIN)/python scripts/soak_report.py reports/soak-$(SOAK_DAY).md $(SOAK_XML)/soak.xml \
	  $$(for i in $$(seq $(SOAK_REPEAT)); do echo $(SOAK_XML)/two-drivers-$$i.xml; done); \
	exit $$rc

# Once per submission (docs/contributing.md, "Before you submit"): the next CI run takes the next
# soak slice (tests/soak_round), so any SLICES consecutive submissions run every soak case.
soak-round:
	$(BIN)/python tests/soak_slices.py

demo: bootstrap-demo
	$(BIN)/jetspark demo $(DEMO_ARGS)

# The documentation site (docs/, mkdocs.yml): strict, so a broken link or anchor fails it.
docs: bootstrap-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The generated parts of the docs, redrawn from the code: the API and errors tables
# (docs/hooks.py) and the explanation pages' figures (scripts/doc_pictures.py); unit tests fail
# when a committed one is stale.
docs-generated: bootstrap
	$(BIN)/python docs/hooks.py
	$(BIN)/python scripts/doc_pictures.py

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
