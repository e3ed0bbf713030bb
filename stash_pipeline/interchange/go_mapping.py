"""How one row of a Go Stash database becomes a Stash row (``go_import`` drives it).

The Go system's schema, as far as the mapping needs it (columns added by its later
migrations are optional here: a row without them maps the same way):

* namespaces(id, slug, name, description, created_at, updated_at [, persona])
* episodes(id, namespace_id, content, embedding NULL, embedding_model NULL, occurred_at,
  created_at, deleted_at)
* facts(id, namespace_id, content, embedding NULL, embedding_model NULL, confidence,
  valid_from NULL, valid_until NULL, entity, property, value, created_at, updated_at,
  deleted_at [, metadata jsonb with source_episode_ids])
* fact_sources(fact_id, episode_id)
* relationships(id, namespace_id, from_entity, relation_type, to_entity, confidence,
  source_fact_id NULL, created_at, deleted_at)
* patterns(id, namespace_id, content, confidence, source_fact_ids bigint[],
  source_rel_ids bigint[] (no foreign keys), coherence_score, created_at, updated_at, deleted_at)
* contexts(namespace_id, focus, expires_at, created_at, updated_at)
* consolidation_progress(namespace_id, last_episode_id, last_fact_id, last_pattern_fact_id,
  last_pattern_rel_id [, last_goal_progress_fact_id, last_failure_id,
  last_failure_episode_id, last_hypothesis_fact_id], last_run, updated_at)
* settings(key, value): vector_dimension, embedding_model
* embedding_cache(text_hash, model, text, embedding, created_at): text_hash is the hex
  SHA-256 of the text, as in Stash's own cache
* contradictions(id, namespace_id, old_fact_id, new_fact_id, entity, property, old_value,
  new_value, confidence, method 'structured'|'auto', resolved, resolution free text NULL,
  resolved_at, created_at); an automatic replacement is method 'auto', resolution
  'superseded', and the old fact got valid_until
* causal_links(id, namespace_id, cause_fact_id, effect_fact_id [NULL, effect_failure_id],
  confidence, method, created_at, deleted_at)
* hypotheses(id, namespace_id, content, confidence, status, verification_plan default '',
  method, confirmed_fact_id, rejection_reason, source_fact_ids bigint[], tested_at,
  confirmed_at, rejected_at, created_at, updated_at, deleted_at)
* goals(id, namespace_id, parent_id, content, status, priority, notes text (lines appended
  by consolidation: "[PROGRESS] note (confidence: 0.80)", "[SUGGESTED COMPLETE] …",
  "[CONTRADICTED] …"), completed_at, abandoned_at, created_at, updated_at, deleted_at)
* failures(id, namespace_id, goal_id NULL, content, reason default '', lesson default '',
  created_at, deleted_at)

Go soft-deletes with ``deleted_at``. Stash keeps soft-deleted episodes, goals, failures,
hypotheses and causal links as soft-deleted, and retires facts, relationships and
patterns (``withdrawn_at``), with the reason "deleted in Go Stash".
"""

from __future__ import annotations

import re
from typing import Any

DELETED = "deleted in Go Stash"
NOT_RECORDED = "(not recorded in Go Stash)"
_NOTE = re.compile(r"^\[(PROGRESS|SUGGESTED COMPLETE|CONTRADICTED)\]\s*(.*?)(?:\s*\(confidence:\s*([0-9.]+)\))?$")
_NOTE_KINDS = {"PROGRESS": "progress", "SUGGESTED COMPLETE": "suggested_complete", "CONTRADICTED": "contradicted"}
RESOLUTIONS = {
    "superseded": "superseded", "keep_old": "keep_old", "keep_new": "keep_new", "keep_both": "keep_both",
    "neither": "neither", "old_value_correct": "keep_old", "new_value_correct": "keep_new",
    "both_valid": "keep_both", "both_correct": "keep_both",
}
HYPOTHESIS_STATUSES = ("proposed", "testing", "confirmed", "rejected")
#: Go's consolidation cursors -> (Stash stage, which cursor, the id space it counts in)
CURSORS: tuple[tuple[str, str, str, str], ...] = (
    ("last_episode_id", "facts", "cursor", "episode"),
    ("last_fact_id", "relationships", "cursor", "fact"),
    ("last_fact_id", "causal_links", "cursor", "fact"),
    ("last_pattern_fact_id", "patterns", "cursor", "fact"),
    ("last_goal_progress_fact_id", "goal_progress", "cursor", "fact"),
    ("last_failure_episode_id", "failure_patterns", "cursor", "episode"),
    ("last_failure_id", "failure_patterns", "aux_cursor", "failure"),
    ("last_hypothesis_fact_id", "hypothesis_evidence", "cursor", "fact"),
)


def slug(go_slug: str | None) -> str | None:
    """A Stash path for a Go slug: trailing "/" dropped, lowercased, characters Stash does
    not allow in a segment replaced by "-"; None when nothing usable is left."""
    text = (go_slug or "").strip().lower()
    if text in ("", "/"):
        return "/"
    segments = []
    for part in text.strip("/").split("/"):
        cleaned = re.sub(r"[^a-z0-9_-]+", "-", part).strip("-_")[:64]  # a valid segment, or empty
        if not cleaned:
            return None
        segments.append(cleaned)
    return "/" + "/".join(segments)


def relation_type(value: str | None) -> str | None:
    """An identifier (lowercase letters, digits and '_', starting with a letter), or None."""
    text = re.sub(r"[^a-z0-9_]+", "_", (value or "").strip().lower()).strip("_")
    if text and not text[0].isalpha():
        text = "r_" + text
    return text[:64] or None


def clamp(value: Any, default: float = 0.5) -> float:
    if value is None:
        return default
    return min(1.0, max(0.0, float(value)))


def blank(value: Any) -> bool:
    return value is None or not str(value).strip()


def goal_notes(notes: str | None) -> list[dict[str, Any]]:
    """Go's appended goal-notes text as Stash's append-only log: model lines keep their kind
    and confidence, anything else is a caller note."""
    out = []
    for line in (notes or "").splitlines():
        if not line.strip():
            continue
        match = _NOTE.match(line.strip())
        if match:
            confidence = float(match.group(3)) if match.group(3) else None
            out.append({"author": "model", "kind": _NOTE_KINDS[match.group(1)],
                        "content": match.group(2).strip() or line.strip(),
                        "confidence": None if confidence is None else clamp(confidence)})
        else:
            out.append({"author": "caller", "kind": "note", "content": line.strip(), "confidence": None})
    return out


def contradiction(row: dict[str, Any]) -> dict[str, Any]:
    """A Go contradiction's Stash columns that are not Go's own as they are."""
    resolution_text = (row.get("resolution") or "").strip()
    resolution = RESOLUTIONS.get(resolution_text.lower())
    method = row.get("method") if row.get("method") in ("structured", "auto") else "structured"
    return {
        "entity": row.get("entity") or "", "property": row.get("property") or "",
        "old_value": row.get("old_value") or "", "new_value": row.get("new_value") or "",
        "classification": "replacement" if resolution == "superseded" else "contradiction",
        "confidence": clamp(row.get("confidence")), "explanation": "", "method": method,
        "resolved": bool(row.get("resolved")), "resolution": resolution if row.get("resolved") else None,
        # a free-text Go resolution Stash has no action for is kept word for word
        "resolution_note": resolution_text if resolution_text and resolution is None else None,
    }
