# Two entry points for a fresh machine (see README): `make up` and `make test`.
# Everything installs into ./.venv; nothing is installed system-wide.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
INTEROP := .venv-interop

.PHONY: up test test-slow test-server test-interop install lint bench clean smoke-compose scale-test

# not --quiet: pip's own progress (a line per package, a bar per download) shows the
# first install's few minutes are not a hang
$(STAMP): pyproject.toml
	@echo "installing Stash and its dependencies into $(VENV) (the first time takes a few minutes)..."
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

up: $(STAMP)
	$(BIN)/stash up

# the venv's bin first on PATH, as after `source .venv/bin/activate` (tests run `stash`)
test: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q

# also the tests marked slow: the reliability suites' full trial counts and `dagster dev`
test-slow: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q --run-slow

# the integration, MCP and reliability tests against a PostgreSQL server, not the embedded
# one: a throwaway docker container of $$STASH_TEST_PG_IMAGE (default pgvector/pgvector:pg17)
# on a free loopback port, removed afterwards; or the server at $$STASH_TEST_DATABASE_URL
# (a superuser DSN) when set. See tests/server.sh and docs/deploy.md.
test-server: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" PYTHON=$(BIN)/python tests/server.sh

# agent frameworks' own MCP clients and schema converters (openai-agents, pydantic-ai,
# langchain-mcp-adapters, google-genai) driving Stash over stdio and HTTP against a
# scripted model: their own venv, since they pin an older `mcp` than the product
$(INTEROP)/.installed: tests/interop/requirements.txt
	@echo "installing the agent frameworks into $(INTEROP) (the first time takes a few minutes)..."
	$(PYTHON) -m venv $(INTEROP)
	$(INTEROP)/bin/pip install --quiet --upgrade pip
	$(INTEROP)/bin/pip install --quiet -r tests/interop/requirements.txt
	touch $@

test-interop: $(STAMP) $(INTEROP)/.installed
	cd tests/interop && STASH_BIN="$(CURDIR)/$(BIN)/stash" $(CURDIR)/$(INTEROP)/bin/python -m pytest -c pytest.ini

lint: $(STAMP)
	$(BIN)/ruff check stash_pipeline stash_serve testkit tests bench

# docker compose end to end (needs Docker; not part of `make test`): docker/smoke.sh
smoke-compose:
	bash docker/smoke.sh

# the scale profile under load and faults (needs Docker; minutes of both cores): docker/scale/load_faults.py
scale-test: $(STAMP)
	$(BIN)/python docker/scale/load_faults.py

clean:
	rm -rf $(VENV) $(INTEROP)
