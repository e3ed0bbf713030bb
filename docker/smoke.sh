#!/usr/bin/env bash
# End-to-end smoke of docker/docker-compose.yml: build, healthy, token, MCP remember +
# recall over HTTP, the Dagster assets, a sensor-launched run against the tests' scripted
# model, restart, no traceback in any log. Needs Docker + compose v2 and python3 (stdlib).
# Own project name (stash-smoke) and loopback ports (18080, 13000); KEEP=1 leaves it up.
# What it checks, step by step: docker/smoke/smoke.py. Not part of `make test` (CI has no Docker).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 docker/smoke/smoke.py "$@"
