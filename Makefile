# The two commands: `make demo` and `make test`. Each bootstraps what it needs on a fresh machine:
# a .venv with the package and its extras, and a real Apache ZooKeeper (see zkbroker/lab/zookeeper.py).

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test unit integration bench lint zookeeper network-tools clean

$(STAMP): setup.cfg pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,spark]'
	@touch $(STAMP)

zookeeper: $(STAMP)
	@$(PY) -m zkbroker.lab.zookeeper ensure

# The lab network (`lab up --network`, partitions) needs root, iproute2 and nftables; as root we install them.
network-tools:
	@if [ "$$(id -u)" = 0 ] && ! command -v nft >/dev/null && command -v apt-get >/dev/null; then \
		DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 nftables >/dev/null; fi

demo: $(STAMP) zookeeper
	@$(PY) -m zkbroker.lab.demo

test: $(STAMP) zookeeper network-tools lint
	$(PY) -m pytest tests

unit: $(STAMP)
	$(PY) -m pytest tests/unit

integration: $(STAMP) zookeeper network-tools
	$(PY) -m pytest tests/integration

lint: $(STAMP)
	$(PY) -m ruff check .

# Every benchmark prints its figures beside their references; results are summarised in BENCHMARKS.md.
bench: $(STAMP) zookeeper
	@for script in bench/*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
