"""Named queries, loaded once from ``db/queries/*.sql`` (procrastinate style).

Each file holds blocks like::

    -- get_namespace_by_slug --
    -- One namespace by its exact slug.
    SELECT * FROM namespaces WHERE slug = %(slug)s;

The first line names the query, the comment lines after it describe it, the rest is the
statement with ``%(name)s`` parameters. Names are unique across all files.
"""

from __future__ import annotations

import re
from pathlib import Path

QUERY_DIR = Path(__file__).parent / "queries"
_HEADER = re.compile(r"^--\s*([a-z0-9_]+)\s*--\s*$", re.MULTILINE)


def parse(text: str, origin: str = "<string>") -> dict[str, str]:
    """Split one .sql file into {name: statement}."""
    out: dict[str, str] = {}
    parts = _HEADER.split(text)
    # parts = [preamble, name1, body1, name2, body2, ...]
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = [ln for ln in body.strip().splitlines() if not ln.lstrip().startswith("--")]
        statement = "\n".join(lines).strip().rstrip(";").strip()
        if not statement:
            raise ValueError(f"{origin}: query {name!r} is empty")
        if name in out:
            raise ValueError(f"{origin}: query {name!r} defined twice")
        out[name] = statement
    return out


def load_all(directory: Path = QUERY_DIR) -> dict[str, str]:
    queries: dict[str, str] = {}
    for path in sorted(directory.glob("*.sql")):
        for name, statement in parse(path.read_text(encoding="utf-8"), path.name).items():
            if name in queries:
                raise ValueError(f"{path.name}: query {name!r} already defined in another file")
            queries[name] = statement
    return queries


QUERIES: dict[str, str] = load_all()


def query(name: str) -> str:
    try:
        return QUERIES[name]
    except KeyError:
        raise KeyError(f"unknown query {name!r}; add it to stash_pipeline/db/queries/*.sql") from None
