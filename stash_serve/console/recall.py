"""The recall playground: what an agent gets for a question, and why each row ranks."""

from __future__ import annotations

from starlette.routing import BaseRoute

ROUTES: list[BaseRoute] = []
