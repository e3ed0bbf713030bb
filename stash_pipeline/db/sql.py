"""Named queries, loaded once from ``db/queries/*.sql`` (procrastinate style).

Each file holds blocks like::

    -- get_namespace_by_slug --
    -- One namespace by its exact slug.
    SELECT * FROM namespaces WHERE slug = %(slug)s;

The first line names the query, the comment lines after it describe it, the rest is the
statement with ``%(name)s`` parameters. Names are unique across all files.

A block named with a parameter list, ``-- name(kind, t) --``, is a fragment: no query of
its own, but a piece of its file's queries, used as ``{{ name(kind=fact, t=f) }}`` (or
``{{ name }}`` without parameters); in its body ``{{ kind }}`` is the value given. A value
is any SQL text up to the next comma outside parentheses. Uses are expanded innermost
first, so ``{{ visible_{{ kind }}(t={{ t }}) }}`` picks a fragment by a parameter.
Expansion happens here, once, at load: a query is plain SQL by the time it runs.
"""

from __future__ import annotations

import re
from pathlib import Path

from psycopg import sql

QUERY_DIR = Path(__file__).parent / "queries"
_HEADER = re.compile(r"^--\s*([a-z0-9_]+)(\([a-z0-9_, ]*\))?\s*--\s*$", re.MULTILINE)
#: an innermost use: no other use inside
_USE = re.compile(r"\{\{((?:(?!\{\{|\}\}).)*)\}\}", re.DOTALL)
_CALL = re.compile(r"\s*([a-z0-9_]+)\s*(?:\((.*)\))?\s*", re.DOTALL)
_ARGUMENT = re.compile(r"\s*([a-z0-9_]+)\s*=(.*)", re.DOTALL)


def _body(text: str) -> str:
    return "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("--")).strip("\n").rstrip()


def _expand(text: str, fragments: dict[str, tuple[list[str], str]], values: dict[str, str], origin: str,
            used: set[str]) -> str:
    def use(match: re.Match[str]) -> str:
        call = _CALL.fullmatch(match.group(1))
        if call is None:
            raise ValueError(f"{origin}: {match.group(0)!r} is no fragment use")
        name, given = call.group(1), call.group(2)
        if given is None and name in values:
            return values[name]
        if name not in fragments:
            raise ValueError(f"{origin}: {match.group(0)!r} names no fragment or parameter")
        params, body = fragments[name]
        used.add(name)
        args = dict(_argument(a, origin) for a in _split(given)) if given and given.strip() else {}
        if sorted(args) != sorted(params):
            raise ValueError(f"{origin}: {match.group(0)!r} does not give {name}'s parameters {params}")
        return _expand(body, fragments, args, f"{origin} ({name})", used)

    while _USE.search(text):
        text = _USE.sub(use, text)
    return text


def _split(text: str) -> list[str]:
    """``text`` cut at each comma outside parentheses."""
    parts, depth, start = [], 0, 0
    for at, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(text[start:at])
            start = at + 1
    return [*parts, text[start:]]


def _argument(text: str, origin: str) -> tuple[str, str]:
    match = _ARGUMENT.fullmatch(text)
    if match is None:
        raise ValueError(f"{origin}: {text!r} is no name=value")
    return match.group(1), match.group(2).strip()


def parse(text: str, origin: str = "<string>") -> dict[str, str]:
    """Split one .sql file into {name: statement}, its fragments expanded."""
    bodies: dict[str, str] = {}
    fragments: dict[str, tuple[list[str], str]] = {}
    parts = _HEADER.split(text)
    # parts = [preamble, name1, params1, body1, name2, params2, body2, ...]
    for name, params, body in zip(parts[1::3], parts[2::3], parts[3::3], strict=True):
        if name in bodies or name in fragments:
            raise ValueError(f"{origin}: query {name!r} defined twice")
        if params is not None:
            fragments[name] = ([p.strip() for p in params.strip("()").split(",") if p.strip()], _body(body))
            continue
        statement = _body(body).strip().rstrip(";").strip()
        if not statement:
            raise ValueError(f"{origin}: query {name!r} is empty")
        bodies[name] = statement
    used: set[str] = set()
    queries = {name: _expand(body, fragments, {}, f"{origin}: {name}", used) for name, body in bodies.items()}
    if unused := sorted(set(fragments) - used):
        raise ValueError(f"{origin}: fragments {unused} are used by no query")
    return queries


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


def named(name: str, **names: str) -> sql.Composed:
    """A named query whose ``{placeholders}`` are table and column names from the table
    catalog (space-separated names become a list); values still go in as parameters."""
    return sql.SQL(query(name)).format(**{
        key: sql.SQL(", ").join(sql.Identifier(n) for n in value.split()) for key, value in names.items()})
