"""Entities: the subjects facts and relationships are about, one per namespace and name.

A fact's ``entity`` and a relationship's two ends are kept as written; each also points
at an entity (``facts.entity_id``, ``relationships.from_entity_id`` / ``to_entity_id``).
An entity has aliases, unique per namespace by their normalised form (``normalise``),
so "Alice", "alice" and "she (Alice)" are one alias of one entity. The consolidation
stages resolve names to entities (``stash_pipeline.stages.entity_resolution``); here
are the pure normalisation and the corrections and reads callers use.

The functions that take the store take parsed values (``validate``'s module docstring says
which layer checks what): ids as ints, times as UTC datetimes, a page within its bounds;
they check names and notes, the scope, and each correction against the entities it moves.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np
from psycopg.types.json import Jsonb

from stash_pipeline import errors
from stash_pipeline.db.gateway import Row, Session
from stash_pipeline.memory import erasure, lineage, validate
from stash_pipeline.memory.scope import found_in_scope, read_scope, scope_ids
from stash_pipeline.models import (
    EntityMerge,
    EntityMoved,
    EntityPurge,
    EntitySplit,
    EntityView,
    ErasurePreview,
)
from stash_pipeline.store import Store

if TYPE_CHECKING:
    from stash_pipeline.embedding.cache import CachedEmbedder

#: words that stand for a name rather than being one: "she (Alice)" is Alice
PRONOUNS = frozenset(
    {
        "i", "me", "my", "mine", "we", "us", "our", "ours", "you", "your", "yours",
        "he", "him", "his", "she", "her", "hers", "it", "its", "they", "them", "their", "theirs",
        "this", "that", "these", "those", "who", "whom",
    }
)
_PARENTHESISED = re.compile(r"^(?P<outside>[^()]*)\((?P<inside>[^()]*)\)(?P<after>[^()]*)$")


def _words(text: str) -> str:
    """Case-folded, compatibility-normalised, every run of punctuation or space one space."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    kept = "".join(ch if ch.isalnum() else " " for ch in folded)
    return " ".join(kept.split())


def normalise(name: str) -> str:
    """The form two spellings of one name share: "Alice", " alice! " and "she (Alice)" → "alice".

    Case is folded and punctuation and spacing dropped. A parenthesised part names the
    subject when what stands outside it is only a pronoun or nothing ("she (Alice)",
    "(Alice)"); otherwise it is a gloss and is dropped ("Alice Chen (CTO)" → "alice chen").
    """
    if not isinstance(name, str):
        return ""
    match = _PARENTHESISED.match(name.strip())
    if match:
        outside = _words(match["outside"] + " " + match["after"])
        inside = _words(match["inside"])
        if inside and (not outside or all(word in PRONOUNS for word in outside.split())):
            return inside
        if outside:
            return outside
    return _words(name)


def find_or_create(
    tx: Session, namespace_id: int, name: str, key: str, *, embedding: np.ndarray | None, embedding_model: str
) -> tuple[int, bool]:
    """(entity id, created): the entity whose alias ``key`` is, else a new one named ``name``.

    Safe against a concurrent writer recording the same alias: the loser's new row is
    dropped and the winner's entity returned.
    """
    existing = tx.one("entity_alias_lookup", namespace_id=namespace_id, normalised=[key])
    if existing is not None:
        return int(existing["entity_id"]), False
    first = " ".join(name.split()) or key
    row = tx.one(
        "entity_create", namespace_id=namespace_id, name=first, kind=None, normalised=key,
        embedding=embedding, embedding_model=embedding_model,
    )
    assert row is not None
    entity_id = int(row["id"])
    if tx.one("entity_alias_add", entity_id=entity_id, namespace_id=namespace_id, alias=first, normalised=key) is None:
        tx.execute("entity_delete_unused", id=entity_id)
        winner = tx.one("entity_alias_lookup", namespace_id=namespace_id, normalised=[key])
        assert winner is not None
        return int(winner["entity_id"]), False
    return entity_id, True


def name_embedding(embedder: CachedEmbedder, name: str | None, scope: list[str] | None = None) -> np.ndarray | None:
    """The vector an entity name is compared by (of its normalised form), or None for no
    name; ``scope`` is the namespaces of the tool call it serves (``CachedEmbedder.embed``)."""
    key = normalise(name or "")
    return embedder.embed_one(key, scope) if key else None


def link_asserted_fact(tx: Session, store: Store, fact: Row, embedding: np.ndarray | None) -> int | None:
    """Point a caller's new fact at its entity (returned): the one its name is an alias of, else a new one.

    A caller's write calls no model, so only the exact (normalised) name is matched here;
    ``embedding`` is ``name_embedding`` of the fact's entity, computed before the transaction.
    """
    key = normalise(fact.get("entity") or "")
    if not key or all(word in PRONOUNS for word in key.split()):
        return None
    entity_id, _ = find_or_create(
        tx, int(fact["namespace_id"]), fact["entity"], key,
        embedding=embedding, embedding_model=store.settings.embedding_model_name,
    )
    tx.execute("entity_link_fact", id=int(fact["id"]), entity_id=entity_id)
    return entity_id


# --- reads -------------------------------------------------------------------------------

#: the paged sections of ``get_entity`` and their queries (``facts`` is the timeline's current part)
SECTIONS = {
    "aliases": "entity_aliases_of",
    "merged_from": "entity_merged_from",
    "timeline": "entity_facts",
    "relationships": "entity_relationships",
    "causal_links": "entity_causal_links",
    "corrections": "entity_corrections_of",
}


def _entity_id(tx: Session, entity_id: int | None, name: str | None, namespaces: Sequence[str] | None) -> int:
    """The entity a by-id or by-name call means (RecordNotFound outside the scope)."""
    if entity_id is not None:
        return entity_id
    if name is None or not normalise(name):
        raise errors.InvalidInput("give an entity id or a name")
    everywhere, ns_ids = read_scope(tx, ["/"] if namespaces is None else list(namespaces))
    found = tx.all("entity_find_by_alias", normalised=normalise(name), all_namespaces=everywhere, ns_ids=ns_ids)
    if not found:
        raise errors.RecordNotFound(f"no entity is named {name!r} in these namespaces")
    if len(found) > 1:
        where = ", ".join(f"{r['namespace']} (id {r['entity_id']})" for r in found)
        raise errors.InvalidInput(f"{name!r} names an entity in several namespaces: {where}; give the id")
    return int(found[0]["entity_id"])


def _live(tx: Session, entity_id: int, scope: set[int] | None) -> Row:
    """The entity row, following merges to the entity it now is part of."""
    row = found_in_scope(tx.one("entity_get", id=entity_id), scope, f"entity {entity_id}")
    for _ in range(MAX_MERGE_STEPS):
        if row["merged_into"] is None:
            return row
        row = found_in_scope(tx.one("entity_get", id=int(row["merged_into"])), scope, f"entity {entity_id}")
    raise errors.Conflict(f"entity {entity_id} is merged in a loop; split it to repair")


def get_entity(
    store: Store,
    entity_id: int | None = None,
    *,
    name: str | None = None,
    namespaces: Sequence[str] | None = None,
    as_of: datetime | None = None,
    known_at: datetime | None = None,
    limit: int = validate.ENTITY_PAGE_DEFAULT,
    offset: int = 0,
) -> EntityView:
    """Everything known about one entity, by id or by any of its names, a page at a time.

    Returns the entity with its aliases, the entities merged into it, its current facts,
    its relationships (either end), the causal links of its facts, a timeline of its facts
    (superseded ones included, by valid_from) and its corrections. A merged entity's id
    answers with the entity it was merged into (``requested_id`` keeps the one asked for).
    Each list is one page of ``limit`` rows from ``offset`` (the same for every list);
    ``next_offset`` is the offset of the next page while any list has more, else None.
    ``as_of`` / ``known_at`` read facts, relationships and causal links as ``query_facts``
    and ``query_relationships`` do: valid then, as known then (both default to now).
    """
    times = {"as_of": as_of, "known_at": known_at}
    with store.db.transaction() as tx:
        wanted = _entity_id(tx, entity_id, name, namespaces)
        scope = scope_ids(tx, namespaces)
        row = _live(tx, wanted, scope)
        eid = int(row["id"])
        # every section is read within the caller's namespaces (in its query): the entity's
        # facts may be causes of a parent namespace's links, ends of its relationships
        where = {"all_namespaces": scope is None, "ns_ids": sorted(scope or ())}
        # one row past the page tells whether the section goes on
        sections = {
            key: tx.all(query, id=eid, limit=limit + 1, offset=offset, **times, **where)
            for key, query in SECTIONS.items()
        }
        more = any(len(rows) > limit for rows in sections.values())
        page = {key: rows[:limit] for key, rows in sections.items()}
        entity = {key: row[key] for key in ("id", "namespace", "name", "kind", "created_at", "updated_at")}
        return EntityView(
            entity=entity,
            requested_id=wanted,
            **page,
            facts=[f for f in page["timeline"] if f["current"]],
            limit=limit,
            offset=offset,
            next_offset=offset + limit if more else None,
        )


# --- corrections -------------------------------------------------------------------------

#: a merge chain longer than this is a loop (merges keep chains one step long)
MAX_MERGE_STEPS = 20


def _lock_pair(tx: Session, first: int, second: int, scope: set[int] | None) -> tuple[Row, Row]:
    rows = {int(r["id"]): r for r in tx.all("entity_lock", ids=[first, second])}
    for entity_id in (first, second):
        found_in_scope(rows.get(entity_id), scope, f"entity {entity_id}")
    return rows[first], rows[second]


def _record(tx: Session, row: Row, action: str, other: int, moved: EntityMoved, note: str | None) -> int:
    correction = tx.one(
        "entity_correction_add",
        namespace_id=int(row["namespace_id"]),
        action=action,
        entity_id=int(row["id"]),
        other_entity_id=other,
        moved=Jsonb(moved.model_dump()),
        reason=note,
    )
    assert correction is not None
    correction_id = int(correction["id"])
    lineage.add(tx, int(row["namespace_id"]), "entity_correction", correction_id,
                [("entity", int(row["id"])), ("entity", other)])
    return correction_id


def merge_entities(
    store: Store, keep_id: int, merge_id: int, *, note: str | None = None, namespaces: Sequence[str] | None = None
) -> EntityMerge:
    """Merge entity ``merge_id`` into ``keep_id``: its aliases, facts and relationship ends move.

    The merged entity keeps its row (``merged_into``), the correction is recorded with
    what it moved, and ``split_entity(keep_id, <the moved aliases>)`` undoes it.
    """
    if keep_id == merge_id:
        raise errors.InvalidInput("an entity cannot be merged into itself")
    note = validate.optional_text(store.settings, note, "note")
    with store.db.transaction() as tx:
        keep, merge = _lock_pair(tx, keep_id, merge_id, scope_ids(tx, namespaces))
        check_merge(keep, merge)
        aliases = tx.all("entity_move_aliases", source=merge_id, target=keep_id, normalised=None)
        facts = tx.all("entity_move_facts", source=merge_id, target=keep_id, ids=None)
        ends = tx.one("entity_move_relationship_ends", source=merge_id, target=keep_id, from_ids=None, to_ids=None)
        tx.all("entity_repoint_merged", source=merge_id, target=keep_id)
        tx.execute("entity_set_merged_into", id=merge_id, into=keep_id)
        tx.execute("entity_set_merged_into", id=keep_id, into=None)
        moved = _moved([a["normalised"] for a in aliases], len(facts), ends)
        correction_id = _record(tx, keep, "merge", merge_id, moved, note)
    return EntityMerge(id=keep_id, merged_id=merge_id, correction_id=correction_id, moved=moved)


def check_merge(keep: Row, merge: Row) -> None:
    """A merge's rules, checked by the merge and by its preview: one namespace, neither
    entity merged away already."""
    if keep["namespace_id"] != merge["namespace_id"]:
        raise errors.InvalidInput("entities of different namespaces cannot be merged")
    for row in (keep, merge):
        if row["merged_into"] is not None:
            raise errors.InvalidTransition(
                f"entity {row['id']} is already merged into entity {row['merged_into']}; use that one"
            )


def check_split(tx: Session, source: Row, keys: list[str]) -> tuple[dict[str, str], int | None]:
    """A split's rules, checked by the split and by its preview: the entity is not merged
    away, ``keys`` are some of its aliases (normalised) and not all of them. Returns its
    aliases (normalised -> as written) and the entity an earlier merge brought exactly
    those aliases from (None: a new entity takes them)."""
    entity_id = int(source["id"])
    if source["merged_into"] is not None:
        raise errors.InvalidTransition(f"entity {entity_id} is merged into entity {source['merged_into']}")
    known = {a["normalised"]: a["alias"] for a in tx.all("entity_aliases_of", id=entity_id, limit=None, offset=0,
                                                            all_namespaces=True, ns_ids=[])}
    unknown = [k for k in keys if k not in known]
    if unknown:
        raise errors.InvalidInput(f"entity {entity_id} has no alias {', '.join(unknown)}; its aliases: "
                                  f"{', '.join(sorted(known))}")
    if len(keys) == len(known):
        raise errors.InvalidInput("a split must leave the entity at least one alias")
    revived = next((int(m["other_entity_id"]) for m in tx.all("entity_merges_into", id=entity_id)
                    if sorted(m["moved"].get("aliases", [])) == keys), None)
    return known, revived


def _moved(aliases: list[str], facts: int, ends: Row | None) -> EntityMoved:
    ends = ends or {}
    return EntityMoved(
        aliases=sorted(aliases),
        facts=facts,
        relationship_ends=int(ends.get("from_ends", 0)) + int(ends.get("to_ends", 0)),
    )


def split_entity(
    store: Store,
    entity_id: int,
    aliases: Sequence[str],
    *,
    note: str | None = None,
    namespaces: Sequence[str] | None = None,
) -> EntitySplit:
    """Move some aliases of an entity, with the facts and relationship ends written with them, to another.

    When the aliases are exactly those an earlier merge brought in, the merged entity comes
    back (the merge is undone); otherwise a new entity is created, named by the first alias.
    """
    if not aliases or not all(normalise(a) for a in aliases):
        raise errors.InvalidInput("aliases must be a non-empty list of names")
    keys = sorted({normalise(a) for a in aliases})
    note = validate.optional_text(store.settings, note, "note")
    # before the transaction, for a new entity; cached under the caller's trees
    embedding = store.embedder.embed_one(keys[0], list(namespaces or ["/"]))
    with store.db.transaction() as tx:
        source = found_in_scope(
            next(iter(tx.all("entity_lock", ids=[entity_id])), None), scope_ids(tx, namespaces), f"entity {entity_id}"
        )
        known, revived = check_split(tx, source, keys)
        if revived is not None:
            target = revived
            tx.execute("entity_set_merged_into", id=target, into=None)
        else:
            created = tx.one(
                "entity_create", namespace_id=int(source["namespace_id"]), name=known[keys[0]], kind=source["kind"],
                normalised=keys[0], embedding=embedding, embedding_model=store.settings.embedding_model_name,
            )
            assert created is not None
            target = int(created["id"])
        moved_aliases = tx.all("entity_move_aliases", source=entity_id, target=target, normalised=keys)
        wanted = set(keys)
        fact_ids = [int(f["id"]) for f in tx.all("entity_fact_names", id=entity_id) if normalise(f["entity"]) in wanted]
        facts = tx.all("entity_move_facts", source=entity_id, target=target, ids=fact_ids)
        ends = tx.all("entity_relationship_names", id=entity_id)
        from_ids = [int(r["id"]) for r in ends if r["from_entity_id"] == entity_id and normalise(r["from_entity"]) in wanted]
        to_ids = [int(r["id"]) for r in ends if r["to_entity_id"] == entity_id and normalise(r["to_entity"]) in wanted]
        moved_ends = tx.one("entity_move_relationship_ends", source=entity_id, target=target,
                            from_ids=from_ids, to_ids=to_ids)
        moved = _moved([a["normalised"] for a in moved_aliases], len(facts), moved_ends)
        correction_id = _record(tx, source, "split", target, moved, note)
    return EntitySplit(
        id=entity_id, new_id=target, revived=revived is not None, correction_id=correction_id, moved=moved
    )


def purge_entity(store: Store, entity_id: int, namespaces: Sequence[str] | None = None) -> EntityPurge:
    """Erase an entity: it, the entities merged into it, every fact about them and every
    relationship naming them, with everything derived from those (``erasure.erase``),
    their aliases, corrections and cached vectors. Episodes that mention it are the
    agent's record and stay (purge them one by one)."""
    with store.db.transaction() as tx:
        scope = scope_ids(tx, namespaces)
        row = found_in_scope(tx.one("entity_get", id=entity_id), scope, f"entity {entity_id}")
        done, members = _purge(tx, store, entity_id, scope)
    erased = done.report.model_copy(update={"erased": {**done.report.erased, "entity": len(members)}})
    return EntityPurge(entity_id=entity_id, namespace=row["namespace"], purged=True, erased=erased)


def purge_preview(store: Store, entity_id: int, namespaces: Sequence[str] | None = None) -> ErasurePreview:
    """What ``purge_entity`` would erase, by running it and rolling it back
    (``erasure.rehearse``): its members and the entities left nameless among the rest."""
    with store.db.transaction() as tx:
        scope = scope_ids(tx, namespaces)
        found_in_scope(tx.one("entity_get", id=entity_id), scope, f"entity {entity_id}")

        def purged() -> dict[str, list[int]]:
            done, members = _purge(tx, store, entity_id, scope)
            return {**done.rows, "entity": sorted(set(done.rows.get("entity", [])) | set(members))}

        erased = erasure.rehearse(tx, purged)
        return erasure.preview(tx, ("entity", entity_id), erased, scope)


def _purge(tx: Session, store: Store, entity_id: int, scope: set[int] | None) -> tuple[erasure.Erased, list[int]]:
    """Erase the entity, its members and what names them; returns what ``erasure`` erased and
    the members (the entity and those merged into it)."""
    tx.all("entity_lock", ids=[entity_id])
    roots = [(r["kind"], int(r["id"])) for r in tx.all("entity_purge_roots", id=entity_id)]
    done = erasure.erase_rows(tx, store, [(k, i) for k, i in roots if k != "entity"], scope=scope)
    members = [i for k, i in roots if k == "entity"]
    names = [r["text"] for r in tx.all("entity_purge", ids=members)]
    store.embedder.forget_texts(tx, names)
    return done, members
