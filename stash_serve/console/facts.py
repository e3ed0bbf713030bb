"""Facts current and historical, a fact's sources, a property's bi-temporal timeline, contradictions."""

from __future__ import annotations

from starlette.routing import BaseRoute

ROUTES: list[BaseRoute] = []
