"""Resolved entities: entities, their aliases, corrections, and the links from facts and relationships (see 0009_entities.sql).

After the tables exist, every existing fact and relationship end is given an entity by
normalised exact match, one entity per (namespace, normalised spelling); no model is
called. The normalisation is a frozen copy (``_normalise`` below) of
``stash_pipeline.memory.entities.normalise`` as it was when this migration was written:
a migration replayed later must give the same data, whatever the application's
normaliser has become since (``tests/integration/test_entity_migration.py`` checks the
copy against today's normaliser on a sample).

Revision ID: 0009
Revises: 0007
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from alembic import context, op
from sqlalchemy import text

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

# -- the normaliser, frozen ----------------------------------------------------------------
_PRONOUNS = frozenset(
    {
        "i", "me", "my", "mine", "we", "us", "our", "ours", "you", "your", "yours",
        "he", "him", "his", "she", "her", "hers", "it", "its", "they", "them", "their", "theirs",
        "this", "that", "these", "those", "who", "whom",
    }
)
_PARENTHESISED = re.compile(r"^(?P<outside>[^()]*)\((?P<inside>[^()]*)\)(?P<after>[^()]*)$")


def _words(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = "".join(ch if ch.isalnum() else " " for ch in folded)
    return " ".join(kept.split())


def _normalise(name: str) -> str:
    """"Alice", " alice! " and "she (Alice)" → "alice"; "Alice Chen (CTO)" → "alice chen"."""
    if not isinstance(name, str):
        return ""
    match = _PARENTHESISED.match(name.strip())
    if match:
        outside = _words(match["outside"] + " " + match["after"])
        inside = _words(match["inside"])
        if inside and (not outside or all(word in _PRONOUNS for word in outside.split())):
            return inside
        if outside:
            return outside
    return _words(name)


# The statements here are fixed text with bound values; none is built from data.
_SPELLINGS = text(
    "SELECT namespace_id, entity AS spelling, 0 AS source, min(id) AS first FROM facts WHERE entity IS NOT NULL "
    "GROUP BY namespace_id, entity "
    "UNION ALL SELECT namespace_id, from_entity, 1, min(id) FROM relationships GROUP BY namespace_id, from_entity "
    "UNION ALL SELECT namespace_id, to_entity, 2, min(id) FROM relationships GROUP BY namespace_id, to_entity "
    "ORDER BY 1, 3, 4, 2"
)
_NEW_ENTITY = text(
    "INSERT INTO entities (namespace_id, name, normalised) VALUES (:namespace_id, :name, :normalised) RETURNING id"
)
_NEW_ALIAS = text(
    "INSERT INTO entity_aliases (entity_id, namespace_id, alias, normalised) "
    "VALUES (:entity_id, :namespace_id, :alias, :normalised)"
)
_LINK = (
    text("UPDATE facts SET entity_id = :entity_id WHERE namespace_id = :namespace_id AND entity = ANY(:spellings)"),
    text("UPDATE relationships SET from_entity_id = :entity_id "
         "WHERE namespace_id = :namespace_id AND from_entity = ANY(:spellings)"),
    text("UPDATE relationships SET to_entity_id = :entity_id "
         "WHERE namespace_id = :namespace_id AND to_entity = ANY(:spellings)"),
)


def upgrade() -> None:
    vector_dim = int(context.config.attributes["vector_dim"])
    sql = Path(__file__).with_suffix(".sql").read_text(encoding="utf-8")
    op.execute(sql.replace("{vector_dim}", str(vector_dim)))

    connection = op.get_bind()
    # (namespace, normalised) -> the spellings that normalise to it, first seen first
    groups: dict[tuple[int, str], list[str]] = {}
    # facts first, then relationship ends; within each, the spelling first written first
    for namespace_id, spelling, _source, _first in connection.execute(_SPELLINGS):
        key = _normalise(spelling)
        if key:
            spellings = groups.setdefault((int(namespace_id), key), [])
            if spelling not in spellings:
                spellings.append(spelling)
    for (namespace_id, key), spellings in groups.items():
        entity_id = connection.execute(
            _NEW_ENTITY, {"namespace_id": namespace_id, "name": spellings[0].strip(), "normalised": key}
        ).scalar_one()
        connection.execute(
            _NEW_ALIAS,
            {"entity_id": entity_id, "namespace_id": namespace_id, "alias": spellings[0].strip(), "normalised": key},
        )
        for statement in _LINK:
            connection.execute(statement, {"entity_id": entity_id, "namespace_id": namespace_id, "spellings": spellings})


def downgrade() -> None:
    raise NotImplementedError("Stash does not downgrade; restore from a backup (stash export) instead")
