# karpy — set-up and checks. `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev
# The pure core compiled with mypyc (scripts/build_native.py): built by `make native`, and by
# test and bench (NATIVE=0 skips it); `make demo` runs without it unless built. KARPY_PURE=1 in
# the environment runs the Python source even when a build is there.
NATIVE ?= 1
NATIVE_SOURCES := $(shell find src/karpy/model src/karpy/core -name '*.py') src/karpy/native.py scripts/build_native.py
NATIVE_STAMP := $(if $(filter 1,$(NATIVE)),src/karpy/native.json,)

.PHONY: demo test lint unit conformance bench venv native clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

venv: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

src/karpy/native.json: $(NATIVE_SOURCES) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[native]'
	$(BIN)/python scripts/build_native.py

native: src/karpy/native.json

demo: venv
	mkdir -p out
	$(BIN)/karpy simulate examples/sim/hospital-booking-spikes.yaml --compare cluster-autoscaler --report out/hospital-report.html --json out/hospital.json

lint: $(STAMP)
	$(BIN)/ruff check src tests scripts benchmarks
	$(BIN)/ruff format --check src tests scripts benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: $(STAMP) $(NATIVE_STAMP)
	$(BIN)/python scripts/check_vendored.py
	$(BIN)/pytest; rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest: no tests collected"; exit 1; fi; exit $$rc

conformance: $(STAMP) $(NATIVE_STAMP)
	$(BIN)/karpy conformance tests/conformance

test: lint unit conformance

bench: $(STAMP) $(NATIVE_STAMP)
	$(BIN)/python benchmarks/scheduling.py --table --runs 5
	$(BIN)/python benchmarks/simulation.py --table

clean:
	-test -x $(BIN)/python && $(BIN)/python scripts/build_native.py --clean
	rm -rf $(VENV) build dist src/*.egg-info .mypy_cache .pytest_cache .ruff_cache
