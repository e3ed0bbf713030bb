"""Entities: an entity's facts, profiles and relationships, the graph around it, merge and split."""

from __future__ import annotations

from starlette.routing import BaseRoute

ROUTES: list[BaseRoute] = []
