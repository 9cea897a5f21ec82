# The two commands: `make demo` and `make test`. Each bootstraps what it needs on a fresh machine:
# The two commands: `make demo` and `make test`. Each bootstraps what it needs on a fresh machine:
# a .venv with the package and its extras, a real Apache ZooKeeper (see zkbroker/lab/zookeeper.py);
# `make test` also installs the real tools the tests drive, kcat, docker-compose, nft and ip, and KafkaJS (see
# tests/real_tools.py), and builds the Spark standalone-cluster workers' Python: pyspark and pyarrow only
# (zkbroker/lab/spark_cluster.py).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test unit integration bench lint zookeeper tools spark-workers bytecode clean

$(STAMP): setup.cfg pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,spark,dashboard]'
	@touch $(STAMP)

zookeeper: $(STAMP)
	@$(PY) -m zkbroker.lab.zookeeper ensure

# The real tools the suite drives (kcat, docker-compose; nft and ip for the lab network), from Debian's packages,
# and KafkaJS (npm ci in tests/node).
tools: $(STAMP)
	@$(PY) -m tests.real_tools ensure

# Built once per Python, pyspark and pyarrow version, into ~/.cache/zkbroker/spark-worker-python/.
spark-workers: $(STAMP)
	@$(PY) -m zkbroker.lab.spark_cluster ensure-worker-python >/dev/null

# Every broker, tool and lab command is a Python process of its own that imports the project's modules. An
# editable install leaves them uncompiled, and where PYTHONDONTWRITEBYTECODE is set (as on some CI machines) no
# process caches its bytecode, so most of them compiled what they import again (a broker's imports: 1.07 CPU-s,
# 0.79 compiled; docs/testing-and-benchmarks.md). Compiled once here, they are only read (compileall rewrites
# only what changed).
bytecode: $(STAMP)
	@$(PY) -m compileall -q -j 0 -x node_modules zkbroker consumer controller tests bench >/dev/null

demo: $(STAMP) zookeeper bytecode
	@$(PY) -m zkbroker.lab.demo

# The suite mostly waits (session timeouts, elections, JVM start-ups), so it runs on more pytest-xdist workers than
# there are cores; tests/side_by_side.py says what they share (the order, the groups, the tests that run alone).
# PYTEST_ARGS adds options: `make test PYTEST_ARGS=--store-durations` writes the run's own figures into
# tests/durations.json (the order the tests start in, longest first).
# TESTS narrows the run to some files: `make test TESTS="tests/unit tests/integration/test_lab_cli.py"`.
WORKERS ?= 4
PYTEST_ARGS ?=
TESTS ?= tests

test: $(STAMP) zookeeper tools spark-workers bytecode lint
	$(PY) -m pytest -n $(WORKERS) $(PYTEST_ARGS) $(TESTS)

unit: $(STAMP)
	$(PY) -m pytest tests/unit

integration: $(STAMP) zookeeper tools spark-workers bytecode
	$(PY) -m pytest -n $(WORKERS) tests/integration

lint: $(STAMP)
	$(PY) -m ruff check .

# Every benchmark prints its figures beside their references; results are summarised in BENCHMARKS.md.
bench: $(STAMP) zookeeper tools spark-workers bytecode
	@for script in bench/*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
