# Two commands matter: `make demo` and `make test`. Everything else is installed by these targets.
SHELL := /bin/bash
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
IM := $(BIN)/incident-memory
PYTEST_ARGS ?=

.PHONY: venv validate-deploy demo test test-fast test-reliability bench up down lint clean

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

validate-deploy: venv
	bash deploy/validate.sh

test: lint validate-deploy up
	$(BIN)/pytest -m "not reliability or fast" $(PYTEST_ARGS)

test-reliability: venv up
	$(BIN)/pytest -m reliability tests/reliability $(PYTEST_ARGS)

demo: up
	$(IM) demo

bench: up
	$(IM) bench

clean: down
	rm -rf .cache
