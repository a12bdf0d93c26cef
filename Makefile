# cep: `make run` runs the shipped V-shape pattern on the sample ticks; `make test` runs the whole suite.
# Both work on a fresh clone with Python 3.11+ and Java 17+: the virtualenv is created and installed on
# first use, and again whenever pyproject.toml changes (the stamp file below).

SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV    := .venv
VPY     := $(VENV)/bin/python
STAMP   := $(VENV)/.cep-installed
# The interpreter that creates the venv: the first of these that is 3.11 or newer (override: make PYTHON=...).
PYTHON  ?= $(shell for p in python3 python3.13 python3.12 python3.11 python; do \
             command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
             && { echo $$p; break; }; done)

# Spark's Python workers must run the venv's interpreter (else: "No module named 'pyarrow'" on workers).
export PYSPARK_PYTHON        := $(abspath $(VPY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(VPY))
export SPARK_LOCAL_IP        ?= 127.0.0.1

.PHONY: help run test test-durations test-sql-differential test-clause-functions test-stream-properties lint bench bench-rules bench-kafka bench-worker bench-state soak kafka clean distclean venv check-java check-python jvm-archive

help:
	@echo "make run        run patterns/v_shape.sql over patterns/data/ticks.csv on a local Spark (--engine spark)"
	@echo "make test       run the whole test suite (pytest)"
	@echo "make test-durations  run it as make test does and record each file's seconds in tests/durations.json"
	@echo "make lint       ruff: the checks and the format of pyproject.toml's [tool.ruff]"
	@echo "make bench      run bench/run.py, if present"
	@echo "make bench-rules  two alert rules over generated 10M-event logs: cep, its VM, Spark, PyFlink (~30 min)"
	@echo "make bench-kafka  cep stream (--state spark and --state driver), Spark's floor and Flink SQL through a real Kafka broker, one after another, 30-60 minutes (bench/kafka_e2e.py)"
	@echo "make bench-worker the alerting worker's bucket calls, column-wise rules on and off (bench/alerting_worker.py)"
	@echo "make soak       a 10-minute stream with bad rows, late rows and a SIGKILLed driver (bench/soak.py; MINUTES=...)"
	@echo "make bench-state  open partial matches of 100k and 300k keys on RocksDB and HDFS state stores (bench/state_scale.py)"
	@echo "make kafka      run a one-node Kafka broker on 127.0.0.1:9092 until Ctrl-C (TOPICS=\"ticks:4 alerts\", KAFKA_PORT=...)"
	@echo "make test-sql-differential  the python engine against Spark SQL on many generated expressions (EXAMPLES=300)"
	@echo "make test-clause-functions  the clause's numeric functions at their edges against Spark SQL (CLAUSE_EXAMPLES=200)"
	@echo "make test-stream-properties  the streaming engine's pure-Python properties with more examples (STREAM_EXAMPLES=180)"
	@echo "make clean      remove caches and build leftovers (make distclean also removes $(VENV))"

# The demo shows what the pipeline runs: a Spark job (the same rows as --engine python, which starts at once).
run: venv check-java
	@echo "cep run on a local Spark: starting it takes 10-20 s (--engine python prints the same rows at once)"
	$(VENV)/bin/cep run patterns/v_shape.sql --input patterns/data/ticks.csv --engine spark

# Two test processes, each with its own Spark (pytest-xdist; a file's tests stay together, in order):
# most of the suite's time is spent waiting for JVMs, brokers and micro-batches, so two processes on two
# cores take about 17 minutes where one takes about 30 (measured on the 2-core machine CI uses).
TEST_WORKERS ?= 2

# The linter first (seconds): a finding fails the suite as a failing test does.
test: venv check-java lint jvm-archive
	$(VPY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15

# tests/durations.json: each test file's seconds in a whole run, the order in which make test's workers get the
# files (longest first, tests/file_order.py). Run it on the 2-core machine after adding or slowing a test file.
test-durations: venv check-java jvm-archive
	$(VPY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --record-durations

# The class-data archive every Spark driver of the suite maps (tests/jvm_options.py): built once per JDK and
# pyspark into ~/.cache/cep/jvm-archive/ (about a minute of CPU and 160 MB), then only looked up.
jvm-archive: venv check-java
	$(VPY) -m tests.jvm_options || echo "no class-data archive: the tests run without it"

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# tests/test_sql_differential.py with more examples than `make test` runs (each: about 24 expressions,
# one Spark query, one DuckDB statement per expression).
EXAMPLES ?= 300
test-sql-differential: venv check-java
	SQL_DIFFERENTIAL_EXAMPLES=$(EXAMPLES) $(VPY) -m pytest -p no:xdist -q tests/test_sql_differential.py

# tests/test_clause_functions.py's Spark property with more examples than `make test` runs (each: up to 8
# function applications over edge values, one Spark query, cep on the VM and the column-wise engines).
CLAUSE_EXAMPLES ?= 200
test-clause-functions: venv check-java
	CLAUSE_FUNCTIONS_EXAMPLES=$(CLAUSE_EXAMPLES) $(VPY) -m pytest -p no:xdist -q tests/test_clause_functions.py

# The streaming engine's pure-Python properties (LocalStream, the column-wise path, the alerting worker and the
# driver layout against the per-key VM and the batch replay) with STREAM_EXAMPLES examples each, where make test
# runs 15-90 (docs/testing.md, "Property examples"). No Spark: CPU only, minutes.
STREAM_EXAMPLES ?= 180
STREAM_PROPERTY_FILES = tests/test_streaming.py tests/test_streaming_columnar.py tests/test_streaming_vshape.py \
	tests/test_early_release.py tests/test_alerting_columnwise.py tests/test_driver_row_order.py \
	tests/test_alerting_driver.py
test-stream-properties: venv
	CEP_STREAM_EXAMPLES=$(STREAM_EXAMPLES) $(VPY) -m pytest -p no:xdist -q -m "not spark" $(STREAM_PROPERTY_FILES)

# PyFlink (a peer) goes into its own venv, bench/.venv-flink, once; without network or Java 17 the bench
# still runs and its Flink rows say why they were not run.
bench: venv check-java
	@$(VPY) bench/peers/flink.py setup || echo "PyFlink set-up failed: the bench runs without it"
	@if [ -f bench/run.py ]; then $(VPY) bench/run.py; else echo "bench/run.py does not exist yet: nothing to run"; fi

# The alert-rule bench (issue 19): brute force and card testing over generated 10M-event logs, cep against
# the Pike VM, the Spark replay and PyFlink; writes bench/results-alert-rules.json and its section of
# docs/performance.md. Apart from `make bench`: about half an hour of a shared 2-core machine. ROWS=... for less.
ROWS ?= 10000000
bench-rules: venv check-java
	@$(VPY) bench/peers/flink.py setup || echo "PyFlink set-up failed: the bench runs without it"
	$(VPY) bench/alert_rules.py --rows $(ROWS)

# Not part of test or bench (30-60 minutes): ticks through a real Kafka broker into cep stream in both state
# layouts (--state spark, then --state driver, each named) and, each on a topic of its own, Flink SQL (PyFlink as for make bench, plus Flink's Kafka SQL connector fetched by Maven
# into ~/.cache/cep/ once); writes bench/results-kafka-e2e.json and regenerates docs/performance.md.
# State at scale: each (store, keys) in its own process; writes bench/results-state-scale.json and regenerates
# docs/performance.md. KEYS=100000,1000000 for other sizes.
bench-state: venv check-java
	$(VPY) bench/state_scale.py $(if $(KEYS),--keys $(KEYS))
	$(VPY) bench/run.py --report-only

bench-kafka: venv check-java
	@$(VPY) bench/peers/flink.py setup || echo "PyFlink set-up failed: the Kafka bench runs without it"
	$(VPY) bench/kafka_e2e.py
	$(VPY) bench/run.py --report-only

# Not part of test or bench (about 10 minutes): the alerting worker's bucket calls in-process, its column-wise
# rules on and off (every rule per key); writes bench/results-alerting-worker.json and regenerates docs/performance.md.
bench-worker: venv
	$(VPY) bench/alerting_worker.py
	$(VPY) bench/run.py --report-only

# Not part of test or bench: it runs for MINUTES minutes (default 10) and writes bench/results-soak.json.
MINUTES ?= 10
soak: venv check-java
	$(VPY) bench/soak.py --minutes $(MINUTES) --json bench/results-soak.json

# A real Kafka 4.x broker (KRaft, one node) for trying cep: its jars are copied from Maven Central into
# ~/.cache/cep/kafka-<version>/ on first use (tests/kafka_broker_pom.xml), then reused. TOPICS="alerts ticks:4"
# creates topics (NAME or NAME:PARTITIONS); KAFKA_DIR=... keeps config, data and logs in that folder.
# KAFKA_PORT=... picks the client port (default 9092, Kafka's usual one; KAFKA_PORT=0: any free port).
TOPICS ?=
KAFKA_PORT ?= 9092
kafka: venv check-java
	$(VPY) tests/kafka_broker.py $(if $(KAFKA_DIR),--dir $(KAFKA_DIR)) $(if $(filter-out 0,$(KAFKA_PORT)),--port $(KAFKA_PORT)) $(foreach t,$(TOPICS),--topic $(t))

venv: $(STAMP)

# (Re)build the venv when it is missing, broken (its python does not run) or older than pyproject.toml.
$(STAMP): pyproject.toml | check-python
	@if ! $(VPY) -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; then \
		echo "creating $(VENV) with $(PYTHON)"; rm -rf $(VENV); $(PYTHON) -m venv $(VENV); \
	fi
	$(VPY) -m pip install --upgrade pip
	@# The distribution was called "cep" before "cep-spark": an old editable install would still map the
	@# former top-level names grammar/matcher/spark_bridge, so it goes first.
	@$(VPY) -m pip uninstall -y -q cep >/dev/null 2>&1 || true
	$(VPY) -m pip install -e '.[dev]'
	@touch $(STAMP)

check-python:
	@if [ -z "$(PYTHON)" ]; then \
		echo "cep needs Python 3.11 or newer (python3 --version says: $$(python3 --version 2>&1))."; \
		echo "Install one, e.g. apt-get install python3 python3-venv, or run make PYTHON=/path/to/python3.11"; \
		exit 1; \
	fi

check-java:
	@if ! command -v java >/dev/null 2>&1; then \
		echo "Spark needs Java 17 or newer, and no 'java' is on PATH."; \
		echo "Install it, e.g.: apt-get install openjdk-17-jre-headless"; \
		exit 1; \
	fi; \
	version=$$(java -version 2>&1 | sed -n -E 's/.*version "([0-9]+)(\.[0-9]+)?.*/\1/p' | head -n 1); \
	if [ -z "$$version" ] || [ "$$version" -lt 17 ]; then \
		echo "Spark needs Java 17 or newer; java -version reports:"; java -version 2>&1 | sed 's/^/    /'; \
		echo "Install a newer one, e.g.: apt-get install openjdk-17-jre-headless"; \
		exit 1; \
	fi

clean:
	rm -rf .pytest_cache .hypothesis spark-warehouse metastore_db derby.log build dist
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
