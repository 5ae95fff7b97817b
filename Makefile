# Two commands matter: `make demo` and `make test`. Everything else is installed by these targets.
SHELL := /bin/bash
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
IM := $(BIN)/incident-memory
PYTEST_ARGS ?=

.PHONY: browser review venv validate-deploy demo test test-fast test-reliability test-integration bench up down lint clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

venv: $(VENV)/.installed

up: venv
	$(IM) up

down:
	@if [ -x $(IM) ]; then $(IM) down; fi

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

validate-deploy: venv
	bash deploy/validate.sh

# Debian's chromium and chromium-driver for the review page's browser tests (installed only when missing).
browser: venv
	$(BIN)/python -m deploy.local.browser

# Two passes over the one stack `up` started: the parallel one (pytest-xdist, TEST_WORKERS processes, a
# module's tests on one worker so its module fixtures start once; the heavy modules handed out first, in
# the collection order tests/xdist_order.py sets), then the `serial` tests alone (they restart a shared
# process or bound a wall-clock time: tests/conftest.py). Both run; either failing fails.
TEST_WORKERS ?= 4
TEST_MARKS := (not reliability or fast)
# The serial pass collects only the files that mark a test serial, not the whole suite again
# (tests/serial_pass.py refuses a serial test marked in a file that does not say so).
SERIAL_FILES = $(shell grep -rl --include='test_*.py' 'pytest.mark.serial' tests)
test: lint validate-deploy up browser
	rc=0; \
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder -m "$(TEST_MARKS) and not serial" --durations=25 $(PYTEST_ARGS) || rc=$$?; \
	$(BIN)/pytest -m "$(TEST_MARKS) and serial" --durations=10 $(PYTEST_ARGS) $(SERIAL_FILES) || rc=$$((rc ? rc : $$?)); \
	exit $$rc

# No Kafka, no Postgres, under a minute: every test whose fixtures reach `stack` is marked `stack`
# (tests/conftest.py) and left out here, with the slow and reliability suites.
test-fast: venv
	$(BIN)/pytest -q -m "not stack and not slow and not reliability" $(PYTEST_ARGS)

# Also the heavy property tests with every example they were written with (make test draws a share:
# tests/property_depth.py).
DEEP_PROPERTY_TESTS := tests/test_canonical_json.py tests/test_tokens.py tests/projector/test_plans_agree.py \
	tests/compactor/test_loki.py
test-reliability: venv up
	$(BIN)/pytest -m reliability tests/reliability $(PYTEST_ARGS)
	INCIDENT_MEMORY_DEEP_PROPERTIES=1 $(BIN)/pytest -q $(DEEP_PROPERTY_TESTS) $(PYTEST_ARGS)

# Prometheus part only (issue 18, item 3; Loki is AGPL, not used: tests/integration/README.md): build
# Prometheus v0.316.0 (cached: deploy/local/gobin.py), record fresh answers from it
# (benchmarks/record_prometheus.py, 2 minutes) and check the compactor on them; then the live scenario
# (tests/integration, 2 minutes): Prometheus scraping the pipeline's services while they run an incident.
INTEGRATION_DIR ?= .cache/integration
test-integration: venv
	rm -rf $(INTEGRATION_DIR)/prometheus
	$(BIN)/python -m benchmarks.record_prometheus --out $(INTEGRATION_DIR)/prometheus --seconds 120 >/dev/null
	REAL_PROMETHEUS_ANSWERS=$(INTEGRATION_DIR)/prometheus $(BIN)/pytest -q tests/compactor/test_real_prometheus.py $(PYTEST_ARGS)
	INTEGRATION_DIR=$(INTEGRATION_DIR) $(BIN)/pytest -q -m integration tests/integration $(PYTEST_ARGS)

demo: up
	$(IM) demo $(if $(MODEL),--model $(MODEL)) $(if $(JUDGE_MODEL),--judge-model $(JUDGE_MODEL))

# The demo, then its review page (read-only) until Ctrl-C.
review: up
	$(IM) demo --review

bench: up
	$(IM) bench

clean: down
	rm -rf .cache
