"""The record tables of a namespace tree as export and import see them.

One entry per table, in the order an import must write them (a row's references exist
before the row). Columns are not listed here: both sides read them from the database
catalog (``interchange_columns``), so a column added by a later migration travels
without code changes. What is listed is what the columns cannot say: which id space
each reference points into, which references may point outside an exported tree (and
then become null), and which self-references are filled in after every row exists.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa


@dataclass(frozen=True)
class Table:
    """One exported table."""

    name: str
    #: the id space of its rows: the name lineage and dead letters use for them
    kind: str
    #: column -> the id space it refers to (``namespace_id`` is implied)
    references: dict[str, str] = field(default_factory=dict)
    #: references that may point outside the tree; they become null instead of dropping the row
    nullable: frozenset[str] = frozenset()
    #: self-references written after every row of the table exists
    deferred: tuple[str, ...] = ()
    #: the text column its vector is computed from, when it has one
    embedded: str | None = None
    #: whether rows have their own ``id`` (contexts and lineage do not)
    has_id: bool = True


TABLES: tuple[Table, ...] = (
    Table("namespaces", "namespace"),
    Table("episodes", "episode", embedded="content"),
    Table("goals", "goal", {"parent_id": "goal"}, frozenset({"parent_id"}), deferred=("parent_id",)),
    Table("failures", "failure", {"goal_id": "goal"}, frozenset({"goal_id"})),
    Table("entities", "entity", {"merged_into": "entity"}, frozenset({"merged_into"}),
          deferred=("merged_into",), embedded="normalised"),
    Table("entity_aliases", "entity_alias", {"entity_id": "entity"}, has_id=False),
    Table("entity_corrections", "entity_correction", {"entity_id": "entity", "other_entity_id": "entity"}),
    Table("facts", "fact", {"superseded_by": "fact", "entity_id": "entity"}, frozenset({"superseded_by", "entity_id"}),
          deferred=("superseded_by",), embedded="content"),
    Table("relationships", "relationship",
          {"source_fact_id": "fact", "from_entity_id": "entity", "to_entity_id": "entity"},
          frozenset({"from_entity_id", "to_entity_id"})),
    Table("causal_links", "causal_link",
          {"cause_fact_id": "fact", "effect_fact_id": "fact", "effect_failure_id": "failure"}),
    Table("patterns", "pattern"),
    Table("contradictions", "contradiction", {"old_fact_id": "fact", "new_fact_id": "fact"}),
    Table("hypotheses", "hypothesis", {"confirmed_fact_id": "fact"}, frozenset({"confirmed_fact_id"})),
    Table("hypothesis_evidence", "hypothesis_evidence", {"hypothesis_id": "hypothesis", "fact_id": "fact"},
          frozenset({"fact_id"})),
    Table("goal_notes", "goal_note", {"goal_id": "goal", "fact_id": "fact"}, frozenset({"fact_id"})),
    Table("contexts", "context", has_id=False),
    Table("lineage", "lineage", has_id=False),
    Table("dead_letters", "dead_letter"),
)
BY_NAME = {t.name: t for t in TABLES}
#: columns never exported: derived by the database (full-text index input)
DERIVED = frozenset({"search"})

_SCALARS: dict[str, pa.DataType] = {
    "bigint": pa.int64(),
    "integer": pa.int32(),
    "smallint": pa.int16(),
    "real": pa.float32(),
    "double precision": pa.float64(),
    "boolean": pa.bool_(),
    "timestamp with time zone": pa.timestamp("us", tz="UTC"),
    "timestamp without time zone": pa.timestamp("us"),
    "date": pa.date32(),
}


def arrow_type(pg_type: str) -> pa.DataType:
    """The Arrow type a PostgreSQL column is written as (JSON and text as strings)."""
    if pg_type.endswith("[]"):
        return pa.list_(arrow_type(pg_type[:-2]))
    if pg_type.startswith("vector"):
        return pa.list_(pa.float32())
    return _SCALARS.get(pg_type, pa.string())


def is_json(pg_type: str) -> bool:
    return pg_type in ("jsonb", "json")


def is_list(pg_type: str) -> bool:
    return pg_type.endswith("[]") or pg_type.startswith("vector")
