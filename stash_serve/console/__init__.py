"""The Stash console: memory in the browser, served by the MCP HTTP server under /console.

One module per page, each exporting ``ROUTES`` (its paths under /console):

* ``home``: the namespace tree with counts (episodes, current facts, entities, backlog,
  dead letters) and the last write;
* ``episodes``: the timeline with search and filters, and what was derived from an episode;
* ``recall``: the playground: the recall an agent would get, and why each row ranks;
* ``facts``: current and historical facts, their sources down to the episodes' text, a
  property's bi-temporal timeline, contradictions and supersessions;
* ``entities``: an entity's facts, profiles and relationships, and the graph around it;
* ``pipeline``: per namespace and stage the cursor, backlog, dead letters and model calls;
* ``erasure``: a purge with a preview of everything the cascade erases (admin only).

``app`` holds what they share: sign-in (the same tokens, rights and trees as MCP), the
operations run as that token, and rendering (Jinja2 templates in ``templates/``,
autoescaped; ``static/`` holds the one stylesheet and the little script). The pages are
drawn on the server and work without JavaScript; pictures are SVG drawn on the server
(``pictures``).
"""

from __future__ import annotations

from starlette.routing import BaseRoute

from stash_serve.console import entities, episodes, erasure, facts, home, pipeline, recall

#: the page modules, in the order the navigation lists them
PAGES = (home, episodes, recall, facts, entities, pipeline, erasure)


def routes() -> list[BaseRoute]:
    """Every page's routes."""
    return [route for module in PAGES for route in module.ROUTES]
