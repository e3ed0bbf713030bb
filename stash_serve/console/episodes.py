"""The episode timeline (search, filters) and an episode with what was derived from it."""

from __future__ import annotations

from starlette.routing import BaseRoute

ROUTES: list[BaseRoute] = []
