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

.PHONY: demo test lint unit conformance bench venv native clean lock image

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

# Tests that only compute, and the AWS provider's against a moto server per worker (their only
# wall-clock bounds are generous stop times), run on every core (pytest-xdist); those with
# subprocesses, real-time waits and tight wall-clock bounds (the operator, its faults, recording,
# sweeps) run alone, as their timings assume. tests/architecture/test_makefile.py keeps every test
# folder in one of the two lists.
PARALLEL_TESTS := tests/unit tests/conformance tests/sim tests/architecture tests/docs tests/deploy tests/providers
SERIAL_TESTS := tests/adapters tests/controllers tests/sweep tests/record
PYTEST_CHECK = rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest: no tests collected"; exit 1; fi; [ $$rc -eq 0 ] || exit $$rc

unit: $(STAMP) $(NATIVE_STAMP)
	$(BIN)/python scripts/check_vendored.py
	$(BIN)/pytest -n auto $(PARALLEL_TESTS); $(PYTEST_CHECK)
	$(BIN)/pytest $(SERIAL_TESTS); $(PYTEST_CHECK)

conformance: $(STAMP) $(NATIVE_STAMP)
	$(BIN)/karpy conformance tests/conformance

test: lint unit conformance

bench: $(STAMP) $(NATIVE_STAMP)
	$(BIN)/python benchmarks/startup.py --runs 5
	$(BIN)/python benchmarks/scheduling.py --table --runs 5
	$(BIN)/python benchmarks/simulation.py --table

# requirements.lock: the image's dependencies (pyproject's, and the build's setuptools and wheel)
# pinned with hashes, resolved for CPython 3.11 on Linux (the image's Python). pip-tools runs from
# its own venv under build/, so the dev venv is untouched (pip-tools 7.7 takes the header's
# command from CUSTOM_COMPILE_COMMAND; it has no option for it). Commit the result.
LOCK_PYTHON ?= python3.11
LOCK_TOOLS := build/lock-tools
lock:
	test -x $(LOCK_TOOLS)/bin/pip-compile || { $(LOCK_PYTHON) -m venv $(LOCK_TOOLS) && \
		$(LOCK_TOOLS)/bin/python -m pip install --quiet 'pip-tools>=7.4,<8'; }
	CUSTOM_COMPILE_COMMAND="make lock" $(LOCK_TOOLS)/bin/pip-compile --quiet --upgrade --strip-extras \
		--generate-hashes --allow-unsafe --all-build-deps --no-emit-index-url --no-emit-trusted-host \
		--no-emit-find-links --output-file requirements.lock pyproject.toml

# The operator image (Dockerfile: a pinned python:3.11 patch release, requirements.lock with
# hashes). Needs a running container engine; IMAGE=... names it.
IMAGE ?= karpy:$(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
image:
	@command -v docker >/dev/null || { echo "make image: no docker client here" >&2; exit 1; }
	@docker info >/dev/null 2>&1 || { echo "make image: no container engine runs here (docker info fails); build on a machine where one does" >&2; exit 1; }
	docker build -t $(IMAGE) .

clean:
	-test -x $(BIN)/python && $(BIN)/python scripts/build_native.py --clean
	rm -rf $(VENV) build dist src/*.egg-info .mypy_cache .pytest_cache .ruff_cache
