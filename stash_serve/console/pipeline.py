"""Pipeline health per namespace and stage: cursor, backlog, dead letters, model calls."""

from __future__ import annotations

from starlette.routing import BaseRoute

ROUTES: list[BaseRoute] = []
