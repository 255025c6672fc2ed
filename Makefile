# karpy — set-up and checks. `make demo` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-dev

.PHONY: demo test lint unit conformance bench venv clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

venv: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: venv
	mkdir -p out
	$(BIN)/karpy simulate examples/sim/hospital-booking-spikes.yaml --compare cluster-autoscaler --report out/hospital-report.html --json out/hospital.json

lint: $(STAMP)
	$(BIN)/ruff check src tests scripts benchmarks
	$(BIN)/ruff format --check src tests scripts benchmarks
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/python scripts/check_vendored.py
	$(BIN)/pytest; rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest: no tests collected"; exit 1; fi; exit $$rc

conformance: $(STAMP)
	$(BIN)/karpy conformance tests/conformance

test: lint unit conformance

bench: $(STAMP)
	$(BIN)/python benchmarks/scheduling.py --table --runs 5
	$(BIN)/python benchmarks/simulation.py --table

clean:
	rm -rf $(VENV) build dist src/*.egg-info .mypy_cache .pytest_cache .ruff_cache
