"""Named queries, loaded once from every ``queries/*.sql`` of the package (procrastinate style).

Each file holds blocks like::

    -- get_namespace_by_slug --
    -- One namespace by its exact slug.
    SELECT * FROM namespaces WHERE slug = %(slug)s;

The first line names the query, the comment lines after it describe it, the rest is the
statement with ``%(name)s`` parameters: plain SQL, what PostgreSQL runs (whole-line
comments are dropped, nothing else changes). Names are unique across all files. Most
queries live in ``db/queries/``; a package with queries of its own keeps them beside its
code (``recall/queries/recall.sql``).
"""

from __future__ import annotations

import re
from pathlib import Path

from psycopg import sql

PACKAGE_DIR = Path(__file__).resolve().parents[1]
QUERY_DIR = PACKAGE_DIR / "db" / "queries"
_HEADER = re.compile(r"^--\s*([a-z0-9_]+)\s*--\s*$", re.MULTILINE)


def _body(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("--")).strip("\n").rstrip()


def parse(text: str, origin: str = "<string>") -> dict[str, str]:
    """Split one .sql file into {name: statement}; text before the first name is a preamble."""
    queries: dict[str, str] = {}
    parts = _HEADER.split(text)
    # parts = [preamble, name1, body1, name2, body2, ...]
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries:
            raise ValueError(f"{origin}: query {name!r} defined twice")
        statement = _body(body).strip().rstrip(";").strip()
        if not statement:
            raise ValueError(f"{origin}: query {name!r} is empty")
        queries[name] = statement
    return queries


def query_files(package: Path = PACKAGE_DIR) -> list[Path]:
    """Every ``queries/*.sql`` under the package, ``db/queries`` first."""
    return sorted(package.glob("**/queries/*.sql"), key=lambda p: (p.parent != QUERY_DIR, str(p)))


def load_all(files: list[Path] | None = None) -> dict[str, str]:
    queries: dict[str, str] = {}
    for path in query_files() if files is None else files:
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
        raise KeyError(f"unknown query {name!r}; add it to a queries/*.sql file of stash_pipeline") from None


def named(name: str, **names: str) -> sql.Composed:
    """A named query whose ``{placeholders}`` are table and column names from the table
    catalog (space-separated names become a list); values still go in as parameters."""
    return sql.SQL(query(name)).format(**{
        key: sql.SQL(", ").join(sql.Identifier(n) for n in value.split()) for key, value in names.items()})
