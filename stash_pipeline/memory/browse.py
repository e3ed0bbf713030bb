"""Reads for people looking at memory (the console): overviews the tools do not offer.

Each takes the caller's trees as parsed paths (``scope.read`` resolved them: a token's
trees, or the ones asked for inside them) and reads only inside them; a path naming no
namespace is ``NamespaceNotFound``, as for every read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from psycopg.types.json import Jsonb

from stash_pipeline import errors
from stash_pipeline.memory import validate
from stash_pipeline.memory.scope import read_scope
from stash_pipeline.models import Contradiction, EpisodeOverview, NamespaceOverview, RecordText
from stash_pipeline.store import Store

#: the most namespaces one overview lists
NAMESPACES_MAX = 500
#: the most episodes one page of the timeline lists
EPISODES_PAGE_MAX = 200
#: the longest search (characters) the timeline takes
WORDS_MAX = 500
#: the most derived rows, named rows or contradictions one read returns
RELATED_MAX = 200


def namespaces(store: Store, paths: Sequence[str]) -> list[NamespaceOverview]:
    """The namespaces of the trees ``paths``, by path, each with its counts and last write."""
    with store.db.transaction() as tx:
        all_namespaces, ids = read_scope(tx, list(paths))
        rows = tx.all("browse_namespaces", all_namespaces=all_namespaces, ids=ids, limit=NAMESPACES_MAX)
    return [NamespaceOverview.from_row(r) for r in rows]


def episodes(
    store: Store,
    paths: Sequence[str],
    *,
    before: int | None = None,
    kind: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    metadata: Sequence[Mapping[str, object]] | None = None,
    words: str | None = None,
    limit: int = 50,
) -> list[EpisodeOverview]:
    """A page of the live episodes of the trees ``paths``, newest first, below the id
    ``before`` (keyset paging), each with its count of derived rows inside the trees.

    Filters: ``kind``; ``occurred_at`` in [``since``, ``until``); ``metadata``: the episode's
    metadata contains one of these objects; ``words``: it holds every word (as recall's
    keyword leg reads words: ``stash_lexemes``, English stemming, stop words dropped), so
    a search of stop words alone matches nothing.
    """
    if not 1 <= limit <= EPISODES_PAGE_MAX:
        raise errors.InvalidInput(f"limit must be between 1 and {EPISODES_PAGE_MAX}")
    words = (words or "").strip() or None
    if words is not None and len(words) > WORDS_MAX:
        raise errors.InvalidInput(f"a search is limited to {WORDS_MAX} characters")
    params = {
        "before": before, "kind": validate.kind(kind) if kind else None, "since": since, "until": until,
        "metadata": [Jsonb(dict(m)) for m in metadata] if metadata else None, "limit": limit,
    }
    if words is not None:
        params["words"] = words
    with store.db.transaction() as tx:
        all_namespaces, ids = read_scope(tx, list(paths))
        rows = tx.all("browse_episodes_matching" if words else "browse_episodes",
                      all_namespaces=all_namespaces, ids=ids, **params)
    return [EpisodeOverview.from_row(r) for r in rows]


def records(store: Store, paths: Sequence[str], refs: Sequence[tuple[str, int]]) -> list[RecordText]:
    """The rows ``refs`` (lineage kind, id) inside the trees ``paths``, in the order given, as
    text; one outside the trees or erased is left out (the caller learns nothing of it)."""
    refs = list(refs)[:RELATED_MAX]
    with store.db.transaction() as tx:
        all_namespaces, ids = read_scope(tx, list(paths))
        rows = tx.all("browse_records", all_namespaces=all_namespaces, ids=ids,
                      kinds=[k for k, _ in refs], record_ids=[int(i) for _, i in refs])
    return [RecordText.from_row(r) for r in rows]


def derived(store: Store, paths: Sequence[str], kind: str, ident: int) -> list[RecordText]:
    """What was derived from the row ``kind``/``ident`` (its lineage children) inside the
    trees ``paths``, as text, by kind and id; at most ``RELATED_MAX``."""
    with store.db.transaction() as tx:
        all_namespaces, ids = read_scope(tx, list(paths))
        edges = tx.all("browse_children", kind=kind, id=int(ident), limit=RELATED_MAX)
        rows = tx.all("browse_records", all_namespaces=all_namespaces, ids=ids,
                      kinds=[e["kind"] for e in edges], record_ids=[int(e["id"]) for e in edges])
    return [RecordText.from_row(r) for r in rows]


def fact_contradictions(store: Store, paths: Sequence[str], fact_id: int) -> list[Contradiction]:
    """The contradictions the fact ``fact_id`` is part of (either side), newest first, when
    the fact lies in the trees ``paths`` (else none); at most ``RELATED_MAX``."""
    with store.db.transaction() as tx:
        all_namespaces, ids = read_scope(tx, list(paths))
        rows = tx.all("browse_fact_contradictions", all_namespaces=all_namespaces, ids=ids, id=int(fact_id),
                      limit=RELATED_MAX)
    return [Contradiction.from_row(r) for r in rows]
