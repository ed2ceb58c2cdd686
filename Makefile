# Two commands set everything up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# pyspark 4.0.x for Spark 4.0's own Kafka connector (tests/spark_kafka_connector): its jars fail under pyspark 4.3.
SPARK40_VENV := .venv-spark40
PORT ?= 9092
METRICS_PORT ?= 9644
REGISTRY_PORT ?= 8081
DATA ?= ./data

.PHONY: run test lint bench clean system-deps

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed

# format("odradek")'s JVM sink (jvm/, docs/spark.md "How it writes"), compiled against the venv's pyspark jars into
# the package, where odradek.spark.datasource.JAR finds it.
JVM_SINK := src/odradek/spark/odradek-spark.jar
JVM_SOURCES := $(wildcard jvm/src/io/odradek/spark/*.java) $(wildcard jvm/resources/META-INF/services/*)

$(JVM_SINK): $(JVM_SOURCES) $(VENV)/.installed | system-deps
	rm -rf build/jvm && mkdir -p build/jvm
	javac --release 17 -nowarn -d build/jvm \
	  -cp "$$($(BIN)/python -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')/*" \
	  $(filter %.java,$(JVM_SOURCES))
	cp -r jvm/resources/. build/jvm/
	jar cf $@ -C build/jvm .

$(SPARK40_VENV)/.installed:
	$(PYTHON) -m venv $(SPARK40_VENV)
	$(SPARK40_VENV)/bin/python -m pip install -q 'pyspark==4.0.*'
	touch $@

# Debian packages the tests need: kcat (the librdkafka command-line client), a Java 17+ JDK for Spark and the JVM sink,
# chromium with its WebDriver for the console's browser tests, and Node.js with npm for the schema registry's
# JavaScript clients.
system-deps:
	@MISSING=""; \
	command -v kcat >/dev/null 2>&1 || MISSING="$$MISSING kcat"; \
	command -v javac >/dev/null 2>&1 || MISSING="$$MISSING openjdk-17-jdk-headless"; \
	command -v chromium >/dev/null 2>&1 || MISSING="$$MISSING chromium"; \
	command -v chromedriver >/dev/null 2>&1 || MISSING="$$MISSING chromium-driver"; \
	command -v node >/dev/null 2>&1 || MISSING="$$MISSING nodejs"; \
	command -v npm >/dev/null 2>&1 || MISSING="$$MISSING npm"; \
	[ -z "$$MISSING" ] || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$MISSING >/dev/null; }

run: $(VENV)/.installed
	@echo "Starting a single Odradek node on 127.0.0.1:$(PORT), data in $(DATA). Try, in another shell:"
	@echo "  echo hello | $(BIN)/odradek produce demo --bootstrap-server 127.0.0.1:$(PORT)"
	@echo "  $(BIN)/odradek consume demo --from-beginning --bootstrap-server 127.0.0.1:$(PORT)"
	@echo "  or with kcat: echo hello | kcat -b 127.0.0.1:$(PORT) -t demo -P; kcat -b 127.0.0.1:$(PORT) -t demo -C -e"
	@echo "Web console: http://127.0.0.1:$(METRICS_PORT)/"
	@echo "Prometheus metrics: http://127.0.0.1:$(METRICS_PORT)/metrics (dashboard and alert rules: docs/monitoring.md)"
	@echo "Schema registry (Confluent's REST API): http://127.0.0.1:$(REGISTRY_PORT)/ (docs/schema-registry.md)"
	@echo "Ctrl-C stops the node."
	$(BIN)/odradek server --set listeners=PLAINTEXT://127.0.0.1:$(PORT) --set log.dirs=$(DATA) \
	  --set metrics.listener=http://127.0.0.1:$(METRICS_PORT) \
	  --set schema.registry.listener=http://127.0.0.1:$(REGISTRY_PORT)

# The JavaScript clients of tests/registry/test_javascript_client.py (node and npm from Debian's nodejs, npm).
tests/registry/js/node_modules/.package-lock.json: tests/registry/js/package-lock.json
	npm ci --prefix tests/registry/js --no-audit --no-fund --ignore-scripts
	touch $@

# Three workers on two cores: most tests wait on nodes, elections and Spark more than they compute (two workers kept
# the cores 40 % busy on the cluster tests).
test: $(VENV)/.installed-dev $(SPARK40_VENV)/.installed system-deps $(JVM_SINK) tests/registry/js/node_modules/.package-lock.json
	$(BIN)/python -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder

# Measurements, never part of `make test`: see benchmarks/ (each script's --help).
# The native load generator of `benchmarks/throughput.py --load-generator rdkafka`: compiled with Debian's
# librdkafka headers, linked against the newer librdkafka inside the confluent-kafka wheel.
benchmarks/rdkafka_load: benchmarks/rdkafka_load.c $(VENV)/.installed-dev
	@[ -f /usr/include/librdkafka/rdkafka.h ] || { SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get install -y -qq librdkafka-dev >/dev/null; }
	LIBDIR=$$($(BIN)/python -c "import confluent_kafka, os; print(os.path.realpath(os.path.join(os.path.dirname(confluent_kafka.__file__), '..', 'confluent_kafka.libs')))") && \
	  cc -O2 -Wall -pthread -o $@ $< -L$$LIBDIR -l:$$(ls $$LIBDIR | grep '^librdkafka') -Wl,-rpath,$$LIBDIR

bench: $(VENV)/.installed-dev $(SPARK40_VENV)/.installed system-deps $(JVM_SINK) benchmarks/rdkafka_load
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	$(BIN)/python benchmarks/throughput.py
	$(BIN)/python benchmarks/throughput.py --load-generator rdkafka --value-bytes 100 --partitions 4
	$(BIN)/python benchmarks/latency.py
	$(BIN)/python benchmarks/small_requests.py
	$(BIN)/python benchmarks/scale.py
	$(BIN)/python benchmarks/spark_connectors.py
	$(BIN)/python benchmarks/console.py
	$(BIN)/python benchmarks/schema_registry.py
	$(BIN)/python benchmarks/balancer.py
	$(BIN)/python benchmarks/profile.py
	$(BIN)/python benchmarks/profile.py --small-requests 5000

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests

clean:
	rm -rf $(VENV) $(SPARK40_VENV) build $(JVM_SINK) *.egg-info .pytest_cache .hypothesis
