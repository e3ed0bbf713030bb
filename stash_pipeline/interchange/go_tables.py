"""The Go tables one by one: each function maps a chunk of Go rows to Stash rows that still
hold Go ids and hands them to ``GoImport.put`` (see ``go_import`` for the run and
``go_mapping`` for the row rules); the writer maps the ids and holds every reference to the
rules of ``catalog``, as for an export's import."""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any

from stash_pipeline.db.catalog import BY_NAME, DERIVED, Table
from stash_pipeline.interchange import go_mapping as mapping
from stash_pipeline.interchange.writer import vector_length, vector_text
from stash_pipeline.memory import entities

if TYPE_CHECKING:
    from stash_pipeline.interchange.go_state import GoImport, Mapped

Row = dict[str, Any]
#: what a table's ``build`` gives for a Go row: the Stash row (or None and why not) and its
#: lineage parents [(kind, Go id)]
Built = tuple[Row | None, str | None, list[tuple[str, int]]]
#: the embedding cache is no record table of the catalog: its rows are checked as plain columns
_CACHE = Table("embedding_cache", "embedding_cache", plain="text_hash model endpoint embedding created_at",
               has_id=False)


def namespaces(run: GoImport, rows: list[Row]) -> None:
    """Through the writer's namespace path: an export's path, name and description checks.
    A path another Go namespace holds, in this run or an earlier one, is refused: two Go
    namespaces are never merged into one."""
    taken = run.namespace_paths()
    for row in rows:
        target, why, record = mapping.slug(row.get("slug")), None, None
        if target is None:
            why = f"slug {row.get('slug')!r} has no usable Stash path"
        elif any(path == target and go_id != row["id"] for go_id, path in taken.items()):
            why = f"slug {row.get('slug')!r} maps to {target}, already taken by another Go namespace"
        else:
            description = row.get("description") or ""
            if row.get("persona"):  # Stash has no persona column: keep it readable in the description
                description = (description + "\n\nPersona: " + row["persona"]).strip()
            record = {"id": row["id"], "slug": target, "name": row.get("name") or "", "description": description,
                      "created_at": row.get("created_at"), "updated_at": row.get("updated_at")}
        # one at a time: a later row's path is checked against this one's
        written = run.put("namespaces", BY_NAME["namespaces"], [(str(row["id"]), record, why, [])])
        if written:
            taken[row["id"]] = target
        if written and target != row["slug"]:
            run.writer.skip("namespaces (renamed)", f"{row.get('slug')!r} -> {target}")


def episodes(run: GoImport, rows: list[Row]) -> None:
    def build(row: Row) -> Built:
        return {"kind": "observation", "metadata": {},
                "deleted_reason": mapping.DELETED if row.get("deleted_at") else None}, None, []

    _simple(run, "episodes", rows, build)


def facts(run: GoImport, rows: list[Row]) -> None:
    def build(row: Row) -> Built:
        valid_from = row.get("valid_from") or row.get("created_at")
        valid_until = row.get("valid_until")
        if valid_until is not None and valid_from is not None and valid_until < valid_from:
            valid_until = valid_from  # Stash requires valid_until >= valid_from
        deleted = row.get("deleted_at")
        metadata = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
        parents = [("episode", int(e)) for e in metadata.get("source_episode_ids") or [] if str(e).isdigit()]
        return {"confidence": mapping.clamp(row.get("confidence"), 1.0), "origin": "synthesis",
                "valid_from": valid_from, "valid_until": valid_until, "withdrawn_at": deleted,
                "withdrawn_reason": mapping.DELETED if deleted else None,
                # system time: learned when created; no longer believed once closed or deleted
                "recorded_at": row.get("created_at"), "retired_at": deleted or valid_until}, None, parents

    written = _simple(run, "facts", rows, build)
    _link_entities(run, [(r, written[str(r["id"])]) for r in rows if str(r["id"]) in written])


def _link_entities(run: GoImport, facts: list[tuple[Row, Row]]) -> None:
    """Link the facts just written to their entities, as the live write path links a new fact."""
    linked = [(row, new) for row, new in facts if entities.normalise(row.get("entity") or "")]
    keys = [entities.normalise(row["entity"]) for row, _ in linked]
    if not keys:
        return
    for (row, new), vector in zip(linked, run.writer.vectors_for(keys), strict=True):
        entities.link_asserted_fact(run.tx, run.store, {"id": new["id"], "namespace_id": new["namespace_id"],
                                                       "entity": row["entity"]}, vector_text(vector))


def fact_sources(run: GoImport, rows: list[Row]) -> None:
    """Lineage fact ← episode, in the fact's namespace (the Go query joins it in)."""
    run.put("fact_sources", BY_NAME["lineage"], [(
        f"{row['fact_id']}:{row['episode_id']}", {"namespace_id": row["namespace_id"], "child_kind": "fact",
                                                  "child_id": row["fact_id"], "parent_kind": "episode",
                                                  "parent_id": row["episode_id"]}, None, []) for row in rows])


def _simple(run: GoImport, table: str, rows: list[Row], build: Any) -> dict[str, Row]:
    """Map a chunk of a Go table with a namespace (and an ``id``) and hand it to ``put``; the
    written rows' ids by Go key. A Go column of a Stash column's name is taken as it is (the
    ids, the text, the times, the vector and its model: the writer keeps the vector when it
    is of this deployment's model and dimension); ``build`` gives the others, or why the row
    is skipped, and the row's lineage parents. A row without the content its table requires
    is skipped as "empty content"."""
    entry = BY_NAME[table]
    shared = entry.columns - DERIVED.get(table, set())
    mapped: list[Mapped] = []
    for row in rows:
        record, why, parents = (None, "empty content", []) if (
            "content" in entry.columns and mapping.blank(row.get("content"))) else build(row)
        if record is not None:
            record = {column: value for column, value in row.items() if column in shared} | record
        mapped.append((str(row.get("id", row["namespace_id"])), record, why, parents))  # a context: its namespace
    return run.put(table, entry, mapped)


def goals(run: GoImport, rows: list[Row]) -> None:
    def build(row: Row) -> Built:
        status = row.get("status") if row.get("status") in ("active", "completed", "abandoned") else "active"
        return {"status": status, "priority": int(row.get("priority") or 0)}, None, []

    _simple(run, "goals", rows, build)
    notes: list[Mapped] = []
    for row in rows:
        imported = int(row["id"]) in run.writer.ids["goal"]  # by this run or an earlier one
        for number, note in enumerate(mapping.goal_notes(row.get("notes")), start=1):
            record = {**note, "goal_id": row["id"], "namespace_id": row["namespace_id"],
                      "created_at": row.get("updated_at")}
            notes.append((f"{row['id']}:{number}", record if imported else None,
                          None if imported else "its goal was not imported", []))
    run.put("goals.notes", BY_NAME["goal_notes"], notes)


def failures(run: GoImport, rows: list[Row]) -> None:
    def build(row: Row) -> Built:
        return {"reason": mapping.recorded(row.get("reason")),
                "lesson": mapping.recorded(row.get("lesson"))}, None, []

    _simple(run, "failures", rows, build)


def relationships(run: GoImport, rows: list[Row]) -> None:
    def build(row: Row) -> Built:
        if row.get("source_fact_id") is None:
            return None, "no source fact (a Stash relationship comes from one fact)", []
        relation = mapping.relation_type(row.get("relation_type"))
        if relation is None or mapping.blank(row.get("from_entity")) or mapping.blank(row.get("to_entity")):
            return None, "an entity or the relation type is empty", []
        return {"relation_type": relation, "confidence": mapping.clamp(row.get("confidence")),
                "withdrawn_at": row.get("deleted_at")}, None, [("fact", int(row["source_fact_id"]))]

    _simple(run, "relationships", rows, build)


def causal_links(run: GoImport, rows: list[Row]) -> None:
    def build(row: Row) -> Built:
        cause, effect_fact = row.get("cause_fact_id"), row.get("effect_fact_id")
        if cause is None or (effect_fact is None) == (row.get("effect_failure_id") is None) or cause == effect_fact:
            return None, "it needs one cause and one other effect", []
        method = row.get("method") if row.get("method") in ("extracted", "asserted") else "extracted"
        return {"confidence": mapping.clamp(row.get("confidence")), "method": method}, None, [
            ("fact", int(f)) for f in (cause, effect_fact) if f is not None]

    _simple(run, "causal_links", rows, build)


def patterns(run: GoImport, rows: list[Row]) -> None:
    def build(row: Row) -> Built:
        parents = [("fact", int(i)) for i in row.get("source_fact_ids") or []]
        parents += [("relationship", int(i)) for i in row.get("source_rel_ids") or []]
        return {"confidence": mapping.clamp(row.get("confidence")), "withdrawn_at": row.get("deleted_at"),
                "coherence": mapping.clamp(row.get("coherence_score"), 0.0)}, None, parents

    _simple(run, "patterns", rows, build)


def contradictions(run: GoImport, rows: list[Row]) -> None:
    def build(row: Row) -> Built:
        old, new = row.get("old_fact_id"), row.get("new_fact_id")
        if old is None or new is None or old == new:
            return None, "it needs two different facts", []
        return mapping.contradiction(row), None, [("fact", int(old)), ("fact", int(new))]

    written = _simple(run, "contradictions", rows, build)
    # only a contradiction the writer let in retires its old fact (finish() points it at the new one)
    run.writer.defer(BY_NAME["facts"], "superseded_by", [
        (run.writer.ids["fact"][int(row["old_fact_id"])], int(row["new_fact_id"])) for row in rows
        if str(row["id"]) in written and mapping.contradiction(row)["resolution"] == "superseded"])


def hypotheses(run: GoImport, rows: list[Row]) -> None:
    def build(row: Row) -> Built:
        status = row.get("status")
        if status not in mapping.HYPOTHESIS_STATUSES:
            return None, f"unknown status {status!r}", []
        parents = [("fact", int(i)) for i in row.get("source_fact_ids") or []]
        return {"verification_plan": mapping.recorded(row.get("verification_plan")),
                "confidence": mapping.clamp(row.get("confidence")),
                "method": row.get("method") or "asserted"}, None, parents

    _simple(run, "hypotheses", rows, build)


def contexts(run: GoImport, rows: list[Row]) -> None:
    _simple(run, "contexts", rows, lambda row: ({"focus": row.get("focus") or ""}, None, []))


def embedding_cache(run: GoImport, rows: list[Row]) -> None:
    endpoint = getattr(run.store.embedder, "endpoint", "") or ""
    settings = run.store.settings
    mapped: list[Mapped] = []
    for row in rows:
        key = f"{row['text_hash']}:{row['model']}"
        if row.get("model") != settings.embedding_model_name or vector_length(row.get("embedding")) != settings.vector_dim:
            mapped.append((key, None, "another embedding model or dimension", []))
            continue
        mapped.append((key, {"text_hash": row["text_hash"], "model": row["model"], "endpoint": endpoint,
                             "embedding": row["embedding"], "created_at": row.get("created_at")}, None, []))
    run.put("embedding_cache", _CACHE, mapped)


def checkpoints(run: GoImport, rows: list[Row]) -> None:
    """Go's cursors as stage checkpoints: the Stash id of the last Go row each had consumed,
    so consolidation continues where Go stopped instead of reading everything again."""
    # Go ids and Stash ids rise together (rows are imported in Go id order), so the last
    # consumed row is found by bisection over the Go ids
    ordered = {kind: sorted(ids.items()) for kind, ids in run.writer.ids.items()}
    for row in rows:
        ns = run.writer.ids["namespace"].get(row["namespace_id"])
        if ns is None:
            run.writer.skip("consolidation_progress", "its namespace was not imported")
            continue
        cursors: dict[str, dict[str, int]] = {}
        for column, stage, which, kind in mapping.CURSORS:
            last = row.get(column)
            if not last:
                continue
            pairs = ordered.get(kind, [])
            position = bisect.bisect_right(pairs, (int(last), float("inf")))
            if position:
                cursors.setdefault(stage, {"cursor": 0, "aux_cursor": 0})[which] = pairs[position - 1][1]
        if sum(run.tx.execute("go_import_checkpoint", namespace_id=ns, stage=stage, **values)
               for stage, values in cursors.items()):
            run.writer.count("consolidation_progress")
        else:
            run.writer.skip("consolidation_progress", "its stages are already at or past Go's cursors")


#: Go tables in the order they are read (references before the rows that use them), each
#: with the key its rows are read in and its handler
TABLES = {"namespaces": ("id", namespaces), "episodes": ("id", episodes), "goals": ("id", goals),
          "failures": ("id", failures), "facts": ("id", facts), "fact_sources": ("fact_id episode_id", fact_sources),
          "relationships": ("id", relationships), "causal_links": ("id", causal_links), "patterns": ("id", patterns),
          "contradictions": ("id", contradictions), "hypotheses": ("id", hypotheses),
          "contexts": ("namespace_id", contexts), "embedding_cache": ("text_hash model", embedding_cache),
          "consolidation_progress": ("namespace_id", checkpoints)}


def run_all(run: GoImport) -> None:
    for table, (key, handler) in TABLES.items():
        for chunk in run.rows(table, key):
            handler(run, chunk)
    run.writer.finish()
