# Two entry points for a fresh machine (see README): `make up` and `make test`.
# Everything installs into ./.venv; nothing is installed system-wide.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: up test test-slow install lint bench clean smoke-compose

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
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

lint: $(STAMP)
	$(BIN)/ruff check stash_pipeline stash_serve tests bench

# docker compose end to end (needs Docker; not part of `make test`): docker/smoke.sh
smoke-compose:
	bash docker/smoke.sh

clean:
	rm -rf $(VENV)
