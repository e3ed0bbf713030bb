"""The Go tables one by one: each function maps a chunk of Go rows and hands them to
``GoImport.put`` (see ``go_import`` for the run and ``go_mapping`` for the row rules)."""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any

from psycopg.types.json import Jsonb

from stash_pipeline.interchange import go_mapping as mapping
from stash_pipeline.interchange.catalog import BY_NAME
from stash_pipeline.interchange.writer import vector_length, vector_text
from stash_pipeline.memory import entities

if TYPE_CHECKING:
    from stash_pipeline.interchange.go_state import GoImport, Mapped

Row = dict[str, Any]
#: the Go tables whose rows are a text (a row without one is skipped)
_WITH_CONTENT = ("episodes", "facts", "goals", "failures", "patterns", "hypotheses")


def _namespace(run: GoImport, row: Row) -> tuple[int | None, str | None]:
    ns = run.new_id("namespace", row.get("namespace_id"))
    return ns, None if ns is not None else "its namespace was not imported"


def namespaces(run: GoImport, rows: list[Row]) -> None:
    """Through the writer's namespace path: an export's path, name and description checks."""
    seen: dict[str, int] = {}
    for row in rows:
        key, target, stash_id, why = str(row["id"]), mapping.slug(row.get("slug")), None, None
        if key not in run.ledger.get("namespaces", {}):
            if target is None or target in seen:
                why = (f"slug {row.get('slug')!r} has no usable Stash path" if target is None
                       else f"slug {row.get('slug')!r} maps to {target}, already taken by another Go namespace")
            else:
                description = row.get("description") or ""
                if row.get("persona"):  # Stash has no persona column: keep it readable in the description
                    description = (description + "\n\nPersona: " + row["persona"]).strip()
                stash_id = run.writer.namespace(f"row Go id {key}", {
                    "id": row["id"], "slug": target, "name": row.get("name") or "", "description": description,
                    "created_at": row.get("created_at"), "updated_at": row.get("updated_at")}, "/", "/")
                why = "refused: a value breaks a rule (see problems)"
        if stash_id is None:
            run.put("namespaces", "namespaces", [(key, None, why, [])])
            continue
        seen[target] = stash_id  # type: ignore[index]
        if target != row.get("slug"):
            run.skip("namespaces (renamed)", f"{row.get('slug')!r} -> {target}")
        run._entry("namespaces")["imported"] += 1
        run.ledger.setdefault("namespaces", {})[key] = stash_id
        run.tx.execute("go_import_record", source=run.source, rows=Jsonb([
            {"source_table": "namespaces", "source_id": key, "kind": "namespaces", "stash_id": stash_id,
             "skipped": None}]))


def episodes(run: GoImport, rows: list[Row]) -> None:
    def build(row: Row, ns: int) -> tuple[Row, None, list[tuple[str, int]]]:
        deleted = row.get("deleted_at")
        return {"namespace_id": ns, "content": row["content"], "kind": "observation", "metadata": {},
                "occurred_at": row.get("occurred_at"), "created_at": row.get("created_at"), "deleted_at": deleted,
                "deleted_reason": mapping.DELETED if deleted else None, **_vector(row)}, None, []

    _simple(run, "episodes", rows, build)


def facts(run: GoImport, rows: list[Row]) -> None:
    def build(row: Row, ns: int) -> tuple[Row, None, list[tuple[str, int]]]:
        valid_from = row.get("valid_from") or row.get("created_at")
        valid_until = row.get("valid_until")
        if valid_until is not None and valid_from is not None and valid_until < valid_from:
            valid_until = valid_from  # Stash requires valid_until >= valid_from
        deleted = row.get("deleted_at")
        metadata = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
        parents = [("episode", int(e)) for e in metadata.get("source_episode_ids") or [] if str(e).isdigit()]
        return {"namespace_id": ns, "content": row["content"], "entity": row.get("entity"),
                "property": row.get("property"), "value": row.get("value"),
                "confidence": mapping.clamp(row.get("confidence"), 1.0), "origin": "synthesis",
                "valid_from": valid_from, "valid_until": valid_until, "withdrawn_at": deleted,
                "withdrawn_reason": mapping.DELETED if deleted else None,
                "created_at": row.get("created_at"), "updated_at": row.get("updated_at"),
                # system time: learned when created; no longer believed once closed or deleted
                "recorded_at": row.get("created_at"), "retired_at": deleted or valid_until, **_vector(row)}, None, parents

    inserted = _simple(run, "facts", rows, build)
    _link_entities(run, [(r, inserted.get(str(r["id"]))) for r in rows])


def _link_entities(run: GoImport, facts: list[tuple[Row, Row | None]]) -> None:
    """Link the facts just written to their entities, as the live write path links a new fact."""
    linked = [(row, new) for row, new in facts if new is not None and entities.normalise(row.get("entity") or "")]
    keys = [entities.normalise(row["entity"]) for row, _ in linked]
    if not keys:
        return
    for (row, new), vector in zip(linked, run.writer.vectors_for(keys), strict=True):
        entities.link_asserted_fact(run.tx, run.store, {"id": new["id"], "namespace_id": new["namespace_id"],
                                                       "entity": row["entity"]}, vector_text(vector))


def fact_sources(run: GoImport, rows: list[Row]) -> None:
    edges: list[Row] = []
    mapped: list[Mapped] = []
    for row in rows:
        key = f"{row['fact_id']}:{row['episode_id']}"
        fact, episode = run.new_id("fact", row["fact_id"]), run.new_id("episode", row["episode_id"])
        if key in run.ledger.get("fact_sources", {}):
            mapped.append((key, None, None, []))
        elif fact is None or episode is None:
            mapped.append((key, None, f"its {'fact' if fact is None else 'episode'} was not imported", []))
        else:
            edges.append({"child_kind": "fact", "child_id": fact, "parent_kind": "episode", "parent_id": episode,
                          "namespace_id": run.writer.namespace_of("fact", fact)})
            mapped.append((key, edges[-1], None, []))
    run.put("fact_sources", "lineage", mapped)


def _vector(row: Row) -> Row:
    """Go's vector and its model (the writer keeps it when they are this deployment's)."""
    return {"embedding": row.get("embedding"), "embedding_model": row.get("embedding_model")}


def _simple(run: GoImport, table: str, rows: list[Row], build: Any) -> dict[str, Row | None]:
    """Map a chunk of a Go table with an ``id`` and a namespace (``build`` gives the Stash row,
    why not, and its lineage parents) and hand it to ``put``."""
    mapped: list[Mapped] = []
    for row in rows:
        key = str(row["id"])
        ns, why = _namespace(run, row)
        if key in run.ledger.get(table, {}) or ns is None:
            mapped.append((key, None, why, []))
        elif table in _WITH_CONTENT and mapping.blank(row.get("content")):
            mapped.append((key, None, "empty content", []))
        else:
            mapped.append((key, *build(row, ns)))
    return run.put(table, table, mapped)


def goals(run: GoImport, rows: list[Row]) -> None:
    def build(row: Row, ns: int) -> tuple[Row | None, str | None, list[tuple[str, int]]]:
        status = row.get("status") if row.get("status") in ("active", "completed", "abandoned") else "active"
        return {"namespace_id": ns, "content": row["content"], "status": status,
                "priority": int(row.get("priority") or 0), "completed_at": row.get("completed_at"),
                "abandoned_at": row.get("abandoned_at"), "created_at": row.get("created_at"),
                "updated_at": row.get("updated_at"), "deleted_at": row.get("deleted_at")}, None, []

    _simple(run, "goals", rows, build)
    run.writer.defer(BY_NAME["goals"], "parent_id", [  # linked by finish(), once every goal is in
        (goal, int(r["parent_id"])) for r in rows
        if r.get("parent_id") is not None and (goal := run.new_id("goal", r["id"])) is not None])
    notes: list[Mapped] = []
    for row in rows:
        goal = run.new_id("goal", row["id"])
        for number, note in enumerate(mapping.goal_notes(row.get("notes")), start=1):
            key = f"{row['id']}:{number}"
            if key in run.ledger.get("goals.notes", {}) or goal is None:
                notes.append((key, None, None if goal is not None else "its goal was not imported", []))
                continue
            notes.append((key, {**note, "goal_id": goal, "namespace_id": run.writer.namespace_of("goal", goal),
                                "created_at": row.get("updated_at")}, None, []))
    run.put("goals.notes", "goal_notes", notes)


def failures(run: GoImport, rows: list[Row]) -> None:
    def build(row: Row, ns: int) -> tuple[Row | None, str | None, list[tuple[str, int]]]:
        return {"namespace_id": ns, "goal_id": run.new_id("goal", row.get("goal_id")), "content": row["content"],
                "reason": row.get("reason") if not mapping.blank(row.get("reason")) else mapping.NOT_RECORDED,
                "lesson": row.get("lesson") if not mapping.blank(row.get("lesson")) else mapping.NOT_RECORDED,
                "created_at": row.get("created_at"), "deleted_at": row.get("deleted_at")}, None, []

    _simple(run, "failures", rows, build)


def relationships(run: GoImport, rows: list[Row]) -> None:
    def build(row: Row, ns: int) -> tuple[Row | None, str | None, list[tuple[str, int]]]:
        if row.get("source_fact_id") is None:
            return None, "no source fact (a Stash relationship comes from one fact)", []
        fact = run.new_id("fact", row["source_fact_id"])
        relation = mapping.relation_type(row.get("relation_type"))
        if fact is None:
            return None, "its source fact was not imported", []
        if relation is None or mapping.blank(row.get("from_entity")) or mapping.blank(row.get("to_entity")):
            return None, "an entity or the relation type is empty", []
        return {"namespace_id": ns, "from_entity": row["from_entity"], "relation_type": relation,
                "to_entity": row["to_entity"], "confidence": mapping.clamp(row.get("confidence")),
                "source_fact_id": fact, "withdrawn_at": row.get("deleted_at"),
                "created_at": row.get("created_at")}, None, [("fact", int(row["source_fact_id"]))]

    _simple(run, "relationships", rows, build)


def causal_links(run: GoImport, rows: list[Row]) -> None:
    def build(row: Row, ns: int) -> tuple[Row | None, str | None, list[tuple[str, int]]]:
        cause = run.new_id("fact", row.get("cause_fact_id"))
        effect_fact = run.new_id("fact", row.get("effect_fact_id"))
        effect_failure = run.new_id("failure", row.get("effect_failure_id"))
        if cause is None or (effect_fact is None) == (effect_failure is None) or cause == effect_fact:
            return None, "its cause or effect was not imported", []
        parents = [("fact", int(row["cause_fact_id"]))]
        if effect_fact is not None:
            parents.append(("fact", int(row["effect_fact_id"])))
        return {"namespace_id": ns, "cause_fact_id": cause, "effect_fact_id": effect_fact,
                "effect_failure_id": effect_failure, "confidence": mapping.clamp(row.get("confidence")),
                "method": row.get("method") if row.get("method") in ("extracted", "asserted") else "extracted",
                "created_at": row.get("created_at"), "deleted_at": row.get("deleted_at")}, None, parents

    _simple(run, "causal_links", rows, build)


def patterns(run: GoImport, rows: list[Row]) -> None:
    def build(row: Row, ns: int) -> tuple[Row | None, str | None, list[tuple[str, int]]]:
        parents = [("fact", int(i)) for i in row.get("source_fact_ids") or []]
        parents += [("relationship", int(i)) for i in row.get("source_rel_ids") or []]
        return {"namespace_id": ns, "content": row["content"], "confidence": mapping.clamp(row.get("confidence")),
                "coherence": mapping.clamp(row.get("coherence_score"), 0.0), "withdrawn_at": row.get("deleted_at"),
                "created_at": row.get("created_at"), "updated_at": row.get("updated_at")}, None, parents

    _simple(run, "patterns", rows, build)


def contradictions(run: GoImport, rows: list[Row]) -> None:
    def build(row: Row, ns: int) -> tuple[Row | None, str | None, list[tuple[str, int]]]:
        old, new = run.new_id("fact", row.get("old_fact_id")), run.new_id("fact", row.get("new_fact_id"))
        if old is None or new is None or old == new:
            return None, "one of its facts was not imported", []
        record = {"namespace_id": ns, "old_fact_id": old, "new_fact_id": new, **mapping.contradiction(row)}
        return record, None, [("fact", int(row["old_fact_id"])), ("fact", int(row["new_fact_id"]))]

    inserted = _simple(run, "contradictions", rows, build)
    # only a contradiction the writer let in retires its old fact (finish() points it at the new one)
    run.writer.defer(BY_NAME["facts"], "superseded_by", [
        (run.new_id("fact", row["old_fact_id"]), int(row["new_fact_id"])) for row in rows
        if inserted.get(str(row["id"])) is not None and mapping.contradiction(row)["resolution"] == "superseded"])


def hypotheses(run: GoImport, rows: list[Row]) -> None:
    def build(row: Row, ns: int) -> tuple[Row | None, str | None, list[tuple[str, int]]]:
        status = row.get("status")
        if status not in mapping.HYPOTHESIS_STATUSES:
            return None, f"unknown status {status!r}", []
        plan = row.get("verification_plan")
        return {"namespace_id": ns, "content": row["content"],
                "verification_plan": plan if not mapping.blank(plan) else mapping.NOT_RECORDED,
                "confidence": mapping.clamp(row.get("confidence")), "status": status,
                "method": row.get("method") or "asserted",
                "confirmed_fact_id": run.new_id("fact", row.get("confirmed_fact_id")),
                "rejection_reason": row.get("rejection_reason"), "tested_at": row.get("tested_at"),
                "confirmed_at": row.get("confirmed_at"), "rejected_at": row.get("rejected_at"),
                "created_at": row.get("created_at"), "updated_at": row.get("updated_at"),
                "deleted_at": row.get("deleted_at")}, None, [("fact", int(i)) for i in row.get("source_fact_ids") or []]

    _simple(run, "hypotheses", rows, build)


def contexts(run: GoImport, rows: list[Row]) -> None:
    mapped: list[Mapped] = []
    for row in rows:
        key = str(row["namespace_id"])
        ns, why = _namespace(run, row)
        record = None if ns is None else {"namespace_id": ns, "focus": row.get("focus") or "",
                                          "expires_at": row.get("expires_at"), "created_at": row.get("created_at"),
                                          "updated_at": row.get("updated_at")}
        mapped.append((key, record, why, []))
    run.put("contexts", "contexts", mapped)


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
    run.put("embedding_cache", "embedding_cache", mapped)


def checkpoints(run: GoImport, rows: list[Row]) -> None:
    """Go's cursors as stage checkpoints: the Stash id of the last Go row each had consumed."""
    # Go ids and Stash ids rise together (rows are imported in Go id order), so the last
    # consumed row is found by bisection over the Go ids
    ordered = {kind: sorted(ids.items()) for kind, ids in run.writer.ids.items()}
    for row in rows:
        ns, why = _namespace(run, row)
        if ns is None:
            run.skip("consolidation_progress", why or "")
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
        moved = sum(run.tx.execute("go_import_checkpoint", namespace_id=ns, stage=stage, **values)
                    for stage, values in cursors.items())
        run._entry("consolidation_progress")["imported"] += 1 if moved else 0
        if not moved:
            run._entry("consolidation_progress")["already"] += 1


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
