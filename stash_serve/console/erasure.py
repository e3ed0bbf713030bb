"""Erasure with a preview of everything a purge takes with it (admin only)."""

from __future__ import annotations

from starlette.routing import BaseRoute

ROUTES: list[BaseRoute] = []
