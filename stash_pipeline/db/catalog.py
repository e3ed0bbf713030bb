"""The record tables of a namespace tree, declared once for export, import and lineage.

One entry per table, in the order an import writes them (a row's references exist before
the row). Each entry names every stored column by what an import must do with it:

* ``refs``: the id space a column points into, and how far away the target may live. The
  rule is the one the live tools enforce: ``same`` namespace (supersession, contradiction,
  causal links, entity links…), ``ancestor`` (a sub-goal's parent lives in its namespace or
  above), ``line`` (a failure's goal: one namespace is the other's ancestor), ``tree``
  (a lineage parent lives in its child's namespace or below). A reference that breaks its
  rule is dropped when ``nullable``, else the row is refused — never imported as is, so a
  token scoped to one tree never reaches a row outside it through an imported id.
* ``text``: free text, held to the content cap without NUL bytes; ``json``: JSON held to
  the metadata cap; ``names``: identifiers such as an episode's kind, checked as the live
  path checks them (a missing one takes the column's default); time columns (``*_at``, ``valid_from``/``valid_until``…) are checked as
  the live path checks timestamps; the ``embedding`` of an ``embedded`` text travels only
  with ``--with-vectors``;
  ``derived`` is computed by the database and never exported; ``plain`` columns are
  checked by the table's own constraints.

``tests/integration/test_interchange_catalog.py`` fails when a migrated schema has a
column this file does not classify, so a new column or reference is one edit here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

SCOPES = ("same", "ancestor", "line", "tree")


@dataclass(frozen=True)
class Ref:
    """A column holding the id of another row."""

    kind: str  #: the id space it points into ("" when ``kind_column`` names it per row)
    nullable: bool = False  #: may be dropped (set to null) instead of refusing the row
    deferred: bool = False  #: a self-reference, filled in once every row of the table exists
    scope: str = "same"  #: where the target may live relative to the row (see the module docstring)
    kind_column: str | None = None  #: for lineage and dead letters: the column naming the id space


@dataclass(frozen=True)
class Table:
    """One exported table."""

    name: str
    kind: str  #: the id space of its rows: the name lineage and dead letters use for them
    times: str = ""  #: its time columns (checked with ``validate.timestamp``)
    plain: str = ""  #: columns the table's constraints check (space-separated)
    refs: dict[str, Ref] = field(default_factory=dict)
    text: str = ""
    json: str = ""
    names: str = ""  #: identifiers checked as the live path checks a kind (``validate.kind``)
    embedded: str | None = None  #: the text column its vector is computed from
    lineage: bool = False  #: whether its rows appear in lineage (as child or parent)
    has_id: bool = True  #: whether rows have their own ``id``
    order: str = "id"  #: the columns an export is sorted by (an order an import can replay)

    @cached_property
    def columns(self) -> frozenset[str]:
        """Every stored column the catalog classifies (timestamps, vectors and ids included)."""
        names = set(self.plain.split()) | set(self.text.split()) | set(self.json.split()) | set(self.refs)
        names |= set(self.names.split())
        names |= {c.kind_column for c in self.refs.values() if c.kind_column}
        names |= set(self.times.split()) | ({"embedding"} if self.embedded else set())  # its vector
        names |= {"id"} if self.has_id else set()
        names |= {"namespace_id"} if self.name != "namespaces" else {"slug"}
        return frozenset(names | DERIVED.get(self.name, set()))

    @property
    def scope(self) -> str:
        """The column that places a row in a tree: its namespace (a namespace: itself)."""
        return "id" if self.name == "namespaces" else "namespace_id"

    @property
    def deferred(self) -> tuple[str, ...]:
        return tuple(c for c, r in self.refs.items() if r.deferred)

    @cached_property
    def kinds(self) -> dict[str, str]:
        """What an import checks per column: "content" (the embedded text), "text", "json", "name" or "time"."""
        found = {c: "time" for c in self.times.split()}
        found |= {c: "json" for c in self.json.split()} | {c: "text" for c in self.text.split()}
        found |= {c: "name" for c in self.names.split()}
        return found | ({self.embedded: "content"} if self.embedded else {})


_CREATED = "created_at"
_STAMPS = "created_at updated_at"
#: columns the database computes, never exported: the full-text index input, and when a
#: row's end last changed (migration 0018: an import recomputes it from the history it writes)
DERIVED = {"episodes": {"search"}, "facts": {"search", "ends_changed_at"}, "relationships": {"ends_changed_at"},
           "causal_links": {"ends_changed_at"}}


_FACT, _SOME_FACT, _ENTITY = Ref("fact"), Ref("fact", nullable=True), Ref("entity", nullable=True)
_BITEMPORAL = "valid_from valid_until recorded_at retired_at"

TABLES: tuple[Table, ...] = (
    Table("namespaces", "namespace", _STAMPS, text="name description", order="slug"),  # parents first
    Table("episodes", "episode", "occurred_at created_at deleted_at", plain="idempotency_key embedding_model",
          names="kind", text="content deleted_reason", json="metadata", embedded="content", lineage=True),
    Table("goals", "goal", f"{_STAMPS} completed_at abandoned_at deleted_at", plain="status priority",
          refs={"parent_id": Ref("goal", nullable=True, deferred=True, scope="ancestor")}, text="content"),
    Table("failures", "failure", "created_at deleted_at", refs={"goal_id": Ref("goal", nullable=True, scope="line")},
          text="content reason lesson", lineage=True),
    Table("entities", "entity", _STAMPS, plain="kind embedding_model",
          refs={"merged_into": Ref("entity", nullable=True, deferred=True)}, text="name normalised",
          embedded="normalised", lineage=True),
    Table("entity_aliases", "entity_alias", _CREATED, refs={"entity_id": Ref("entity")}, text="alias normalised",
          has_id=False, order="entity_id normalised"),
    Table("entity_corrections", "entity_correction", _CREATED, plain="action",
          refs={"entity_id": Ref("entity"), "other_entity_id": Ref("entity")}, text="reason", json="moved",
          lineage=True),
    Table("facts", "fact", f"{_STAMPS} {_BITEMPORAL} withdrawn_at recorded_valid_until stated_valid_until given_valid_until",
          plain="confidence origin embedding_model needs_recheck reinforcements",
          refs={"superseded_by": Ref("fact", nullable=True, deferred=True), "entity_id": _ENTITY},
          text="content entity property value withdrawn_reason rationale", embedded="content", lineage=True),
    Table("relationships", "relationship", f"{_CREATED} withdrawn_at {_BITEMPORAL}", plain="relation_type confidence",
          refs={"source_fact_id": _FACT, "from_entity_id": _ENTITY, "to_entity_id": _ENTITY},
          text="from_entity to_entity", lineage=True),
    Table("causal_links", "causal_link", f"{_CREATED} withdrawn_at deleted_at {_BITEMPORAL}",
          plain="confidence method", text="rationale", lineage=True,
          refs={"cause_fact_id": _FACT, "effect_fact_id": _FACT, "effect_failure_id": Ref("failure")}),
    # the ends each held before a change, with its system time (migration 0016)
    Table("fact_ends", "fact_end", "valid_until replaced_at", refs={"fact_id": _FACT, "superseded_by": _SOME_FACT},
          has_id=False, order="fact_id replaced_at"),
    Table("relationship_ends", "relationship_end", "valid_until withdrawn_since replaced_at",
          refs={"relationship_id": Ref("relationship")}, has_id=False, order="relationship_id replaced_at"),
    Table("causal_link_ends", "causal_link_end", "valid_until withdrawn_since replaced_at",
          refs={"causal_link_id": Ref("causal_link")}, has_id=False, order="causal_link_id replaced_at"),
    Table("patterns", "pattern", f"{_STAMPS} withdrawn_at", plain="confidence coherence", text="content rationale",
          lineage=True),
    Table("contradictions", "contradiction", "created_at resolved_at",
          plain="classification confidence method resolved resolution",
          refs={"old_fact_id": _FACT, "new_fact_id": _FACT},
          text="entity property old_value new_value explanation resolution_note", lineage=True),
    Table("hypotheses", "hypothesis", f"{_STAMPS} tested_at confirmed_at rejected_at deleted_at",
          plain="confidence status method", refs={"confirmed_fact_id": _SOME_FACT},
          text="content verification_plan rejection_reason", lineage=True),
    Table("hypothesis_evidence", "hypothesis_evidence", _CREATED, plain="verdict confidence new_confidence action",
          refs={"hypothesis_id": Ref("hypothesis"), "fact_id": _SOME_FACT}, text="reasoning", lineage=True),
    Table("goal_notes", "goal_note", _CREATED, plain="author kind confidence",
          refs={"goal_id": Ref("goal"), "fact_id": _SOME_FACT}, text="content", lineage=True),
    Table("contexts", "context", f"{_STAMPS} expires_at", text="focus", has_id=False),
    Table("lineage", "lineage", _CREATED, has_id=False, order="child_kind child_id parent_kind parent_id",
          refs={"child_id": Ref("", kind_column="child_kind"),
             "parent_id": Ref("", scope="tree", kind_column="parent_kind")}),
    Table("dead_letters", "dead_letter", _STAMPS, plain="stage attempts status", text="last_error", json="payload",
          refs={"item_id": Ref("", kind_column="item_kind")}),
)
BY_NAME = {t.name: t for t in TABLES}
BY_KIND = {t.kind: t for t in TABLES}
#: the id spaces a lineage edge may name
LINEAGE_KINDS = frozenset(t.kind for t in TABLES if t.lineage)
#: the id spaces lineage's cascade can withdraw: the tables with a ``withdrawn_at``
WITHDRAWABLE = tuple(t.kind for t in TABLES if "withdrawn_at" in t.times.split())
#: tables with a namespace that are not part of an export, and why (the catalog test reads this)
NOT_EXPORTED = {
    "model_calls": "operational log of model calls",
    "profile_requests": "the profiles stage's work queue; a restored tree gathers every profile again",
    "recall_term_stats": "derived by the database from episodes and facts",
    "recall_text_stats": "derived by the database from episodes and facts",
    "stage_checkpoints": "consolidation restarts from the beginning in a restored tree",
    "stage_rebuilds": "operational state of a rebuild in progress",
}
#: columns a file written before they existed gets from others of the same row (first non-null)
FILLED = {"facts": {"recorded_at": ("created_at",), "retired_at": ("withdrawn_at", "valid_until")}}
