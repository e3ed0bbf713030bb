"""How one row of a Go Stash database becomes a Stash row (``go_import`` drives it).

The Go system's schema is written once, in ``tests/support/go_stash_schema.sql`` (as its
latest migrations leave it, noting what older versions lack; the migration tests build
their Go databases from it). A column older versions lack is optional here: a row
without it maps the same way. What the schema does not say:

* goals.notes is text consolidation appends lines to: "[PROGRESS] note (confidence:
  0.80)", "[SUGGESTED COMPLETE] …", "[CONTRADICTED] …";
* an automatic replacement is a contradiction of method 'auto', resolution 'superseded',
  whose old fact got valid_until; any other resolution is free text;
* facts.metadata holds source_episode_ids; patterns.source_fact_ids / source_rel_ids and
  hypotheses.source_fact_ids are arrays without foreign keys (an id may be gone);
* embedding_cache.text_hash is the hex SHA-256 of the text, as in Stash's own cache.

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


def recorded(value: Any) -> Any:
    """A text Stash requires (Go's default was ''), or that Go did not record it."""
    return NOT_RECORDED if blank(value) else value


def goal_notes(notes: str | None) -> list[dict[str, Any]]:
    """Go's appended goal-notes text as Stash's append-only log: model lines keep their kind
    and confidence, anything else is a caller note."""
    out = []
    for line in [text.strip() for text in (notes or "").splitlines() if text.strip()]:
        match = _NOTE.match(line)
        if match:
            confidence = float(match.group(3)) if match.group(3) else None
            out.append({"author": "model", "kind": _NOTE_KINDS[match.group(1)],
                        "content": match.group(2).strip() or line,
                        "confidence": None if confidence is None else clamp(confidence)})
        else:
            out.append({"author": "caller", "kind": "note", "content": line, "confidence": None})
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
