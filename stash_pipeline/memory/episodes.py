"""Episodes: what the agent witnessed. Remember (one or a batch), get, forget, purge.

The write path makes no model call. ``remember`` validates, then sends one statement
that resolves the namespace, returns an idempotency-key replay, reads the text's cached
vector and inserts with it: one round trip when the vector is cached. A new text is
embedded outside any transaction (a slow embedder never holds row locks) and a second
statement caches the vector and inserts. ``remember_batch`` reads keys and cached vectors
in one transaction, embeds the new texts in one call, and writes the cache rows and all
episodes (one multi-row statement) in a second. When the store defers vectors
(``Store.defer_vectors``, STASH_EMBED_ON_WRITE), a new text is not embedded on the write
path at all: its row commits with a NULL vector in the same single statement and the
pending-vector worker (``memory/pending.py``) embeds it shortly after. An
``idempotency_key`` makes a retry safe: the replay returns the existing id with
``created: False``; the same key with other content is a ``Conflict``. ``forget`` is semantic, thresholded and previewable, and withdraws what
was derived only from the forgotten episode (``lineage.withdraw_cascade``); ``purge`` is
erasure: the row, its lineage edges and its cached embedding go.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict

from stash_pipeline import errors
from stash_pipeline.db.gateway import Row, Session
from stash_pipeline.embedding.cache import query_key
from stash_pipeline.memory import erasure, lineage, validate
from stash_pipeline.memory.namespaces import resolve_id
from stash_pipeline.memory.scope import found_in_scope, read_scope, scope_ids
from stash_pipeline.models import Cascade, Episode, EpisodePurge, ErasurePreview, ForgetPreview, Remembered
from stash_pipeline.store import Store

MAX_IDEMPOTENCY_KEY = 200


class Checked(BaseModel):
    """One episode's values as checked (``prepare``): what is written, the vector aside."""

    model_config = ConfigDict(frozen=True)

    content: str
    occurred_at: datetime | None
    kind: str
    metadata: dict[str, Any]
    idempotency_key: str | None


# --- validation -------------------------------------------------------------------------


def _idempotency_key(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise errors.InvalidInput("idempotency_key must be a non-empty string")
    if len(value) > MAX_IDEMPOTENCY_KEY or "\x00" in value:
        raise errors.InvalidInput(f"idempotency_key must be at most {MAX_IDEMPOTENCY_KEY} characters, without NUL")
    return value


def _checked(
    store: Store, content: object, occurred_at: datetime | None, kind: object, metadata: object,
    idempotency_key: object,
) -> Checked:
    """One episode's values with content, kind, metadata and key checked (the time arrives parsed)."""
    return Checked(
        content=validate.content(store.settings, content),
        occurred_at=occurred_at,
        kind=validate.kind(kind or "observation"),
        metadata=validate.metadata(metadata, store.settings),
        idempotency_key=_idempotency_key(idempotency_key),
    )


def prepare(store: Store, item: Mapping[str, object]) -> Checked:
    """Validate one episode given as an object (a batch item, a file's row; its time ISO text
    or a datetime); returns the normalised values (no vector yet). The one check of a
    batch item or an imported row."""
    if not isinstance(item, Mapping):
        raise errors.InvalidInput("an episode must be an object with at least 'content'")
    unknown = set(item) - {"content", "occurred_at", "kind", "metadata", "idempotency_key"}
    if unknown:
        raise errors.InvalidInput(f"unknown episode field(s): {', '.join(sorted(unknown))}")
    return _checked(store, item.get("content"), validate.timestamp(item.get("occurred_at"), "occurred_at"),
                    item.get("kind"), item.get("metadata"), item.get("idempotency_key"))


def _replay(existing: Row, item: Checked, where: str = "") -> None:
    if existing["content"] != item.content:
        raise errors.Conflict(
            f"idempotency_key {item.idempotency_key!r}{where} was already used for episode "
            f"{existing['id']} with different content; use a new key for new content"
        )


# --- operations -------------------------------------------------------------------------


def remember(
    store: Store,
    namespace: str,
    content: str,
    *,
    occurred_at: datetime | None = None,
    kind: str = "observation",
    metadata: Mapping[str, object] | None = None,
    idempotency_key: str | None = None,
) -> Remembered:
    """Store one episode in an exact namespace; returns its id and whether it is new.

    ``namespace`` and ``occurred_at`` arrive parsed (the ``remember`` operation's model,
    ``validate.slug`` / ``validate.timestamp``); content, kind, metadata and key are checked here.
    """
    slug = namespace
    item = _checked(store, content, occurred_at, kind, metadata, idempotency_key)
    embedder = store.embedder
    embedder.ensure_lock()
    params = {
        "slug": slug,
        "content": item.content,
        "kind": item.kind,
        "metadata": Jsonb(item.metadata),
        "idempotency_key": item.idempotency_key,
        "embedding_model": store.settings.embedding_model_name,
        "occurred_at": item.occurred_at,
        "text_hash": query_key(item.content, [slug]),
        "model": embedder.name,
        "endpoint": embedder.endpoint,
    }
    defer = store.defer_vectors
    # One round trip when the vector is cached, the key is a replay, or the vector is
    # deferred: namespace, key, cache and insert in one statement.
    row = store.db.one_round_trip("episode_remember_cached", **params, defer_vector=defer)
    assert row is not None  # the statement always returns one row
    if row["namespace_id"] is None:
        raise errors.NamespaceNotFound.create_first(slug)
    if row["existing_id"] is not None:
        _replay({"id": row["existing_id"], "content": row["existing_content"]}, item)
        return Remembered(id=int(row["existing_id"]), namespace=slug, created=False)
    new_id = row["id"]
    if not row["cached"] and defer:
        if new_id is not None:
            store.vectors_pending.set()  # committed without its vector: wake the worker
    elif not row["cached"]:
        # A new text: the model runs outside any transaction (a slow embedder never holds
        # row locks), then the cache write and the insert go in one statement.
        vector = embedder.compute({params["text_hash"]: item.content})[params["text_hash"]]
        row = store.db.one_round_trip("episode_remember_embedded", **params, embedding=vector)
        assert row is not None
        if row["namespace_id"] is None:
            raise errors.NamespaceNotFound.create_first(slug)
        new_id = row["id"]
    if new_id is None:  # a concurrent writer used the key between our read and insert
        with store.db.transaction() as tx:
            found = tx.all(
                "episodes_by_idempotency_keys", namespace_id=row["namespace_id"], keys=[item.idempotency_key]
            )
        _replay(found[0], item)
        return Remembered(id=int(found[0]["id"]), namespace=slug, created=False)
    return Remembered(id=int(new_id), namespace=slug, created=True)


def remember_batch(store: Store, namespace: str, items: Sequence[Mapping[str, object]]) -> list[Remembered]:
    """Store up to ``validate.BATCH_MAX`` episodes atomically (all or nothing); one result per item, in order.

    ``namespace`` arrives parsed (``validate.slug``); each item is checked by ``prepare``.
    """
    slug = namespace
    if not isinstance(items, list) or not items:
        raise errors.InvalidInput("items must be a non-empty list of episodes")
    if len(items) > validate.BATCH_MAX:
        raise errors.InvalidInput(f"a batch holds at most {validate.BATCH_MAX} episodes; got {len(items)}")
    prepared: list[Checked] = []
    for index, raw in enumerate(items):
        try:
            prepared.append(prepare(store, raw))
        except errors.InvalidInput as exc:
            raise type(exc)(f"item {index}: {exc.message}") from None
    # the same key twice inside one batch: the later item is a replay of the earlier one
    first_with_key: dict[str, int] = {}
    for index, item in enumerate(prepared):
        key = item.idempotency_key
        if key is None:
            continue
        if key in first_with_key:
            earlier = prepared[first_with_key[key]]
            if earlier.content != item.content:
                raise errors.Conflict(
                    f"item {index}: idempotency_key {key!r} is used by item {first_with_key[key]} with other content"
                )
        else:
            first_with_key[key] = index

    embedder = store.embedder
    embedder.ensure_lock()
    hashes = [query_key(item.content, [slug]) for item in prepared]
    # one transaction reads the namespace, the keys already used and the cached vectors
    with store.db.transaction() as tx:
        namespace_id = resolve_id(tx, slug)
        existing = {
            r["idempotency_key"]: r
            for r in tx.all("episodes_by_idempotency_keys", namespace_id=namespace_id, keys=list(first_with_key))
        } if first_with_key else {}
        for key, row in existing.items():
            index = first_with_key[key]
            _replay(row, prepared[index], f" (item {index})")
        to_insert = [
            i for i, item in enumerate(prepared)
            if item.idempotency_key is None
            or (item.idempotency_key not in existing and first_with_key[item.idempotency_key] == i)
        ]
        vectors = embedder.lookup_in(tx, sorted({hashes[i] for i in to_insert}))
    # the new texts in one forward pass, outside any transaction; deferred, they go in
    # without a vector and the pending-vector worker embeds them after the commit
    missing = {hashes[i]: prepared[i].content for i in to_insert if hashes[i] not in vectors}
    defer = store.defer_vectors and bool(missing)
    fresh = {} if defer else embedder.compute(missing)
    vectors.update(fresh)

    results: list[Remembered | None] = [None] * len(prepared)
    with store.db.transaction() as tx:
        namespace_id = resolve_id(tx, slug)
        embedder.store_in(tx, fresh)
        rows = tx.all(
            "episode_insert_many",
            namespace_id=namespace_id,
            embedding_model=store.settings.embedding_model_name,
            contents=[prepared[i].content for i in to_insert],
            kinds=[prepared[i].kind for i in to_insert],
            metadata=[Jsonb(prepared[i].metadata) for i in to_insert],
            idempotency_keys=[prepared[i].idempotency_key for i in to_insert],
            embeddings=[vectors.get(hashes[i]) for i in to_insert],
            occurred_at=[prepared[i].occurred_at for i in to_insert],
        ) if to_insert else []
        # rows come back in input order: keyed ones are matched by key, the others in turn
        keyless = iter(i for i in to_insert if prepared[i].idempotency_key is None)
        for row in rows:
            key = row["idempotency_key"]
            index = next(keyless) if key is None else first_with_key[key]
            results[index] = Remembered(id=int(row["id"]), namespace=slug, created=True)
        late_keys = [
            prepared[i].idempotency_key for i in to_insert
            if results[i] is None and prepared[i].idempotency_key is not None
        ]
        if late_keys:  # keys committed by a concurrent writer since our first read
            for r in tx.all("episodes_by_idempotency_keys", namespace_id=namespace_id, keys=late_keys):
                existing[r["idempotency_key"]] = r
                index = first_with_key[r["idempotency_key"]]
                _replay(r, prepared[index], f" (item {index})")
    if defer and rows:
        store.vectors_pending.set()  # committed without vectors: wake the worker
    for index, item in enumerate(prepared):
        if results[index] is not None:
            continue
        key = item.idempotency_key
        assert key is not None  # only a keyed item is left without a result
        first = first_with_key[key]
        earlier = results[first]
        if first != index and earlier is not None:
            results[index] = Remembered(id=earlier.id, namespace=slug, created=False)
        else:
            results[index] = Remembered(id=int(existing[key]["id"]), namespace=slug, created=False)
    return [r for r in results if r is not None]


def _load(tx: Session, ident: int, namespaces: Sequence[str] | None, *, include_deleted: bool) -> Row:
    row = tx.one("episode_get", id=ident)
    return found_in_scope(row, scope_ids(tx, namespaces), f"episode {ident}", include_deleted=include_deleted)


def get(
    store: Store, episode_id: int, namespaces: Sequence[str] | None = None, *, include_deleted: bool = False
) -> Episode:
    """One episode by id; forgotten ones are not found unless include_deleted."""
    with store.db.transaction() as tx:
        return Episode.from_row(_load(tx, episode_id, namespaces, include_deleted=include_deleted))


def forget(
    store: Store,
    about: str,
    namespaces: Sequence[str] = ("/",),
    *,
    threshold: float | None = None,
    preview: bool = False,
) -> ForgetPreview:
    """Soft-delete the episode nearest to ``about`` if similar enough, withdrawing what it alone supported."""
    text = validate.content(store.settings, about, "about")
    limit = store.settings.forget_threshold if threshold is None else validate.probability(threshold, "threshold")
    with store.db.transaction() as tx:
        all_ns, ids = read_scope(tx, namespaces)
    vector = store.embedder.embed_one(text, validate.slugs(namespaces))
    with store.db.transaction() as tx:
        tx.one("recall_search_params", ef_search="100")
        match = tx.one("episode_nearest", embedding=vector, all_namespaces=all_ns, namespace_ids=ids)
        if match is None or float(match["similarity"]) < limit:
            return ForgetPreview(
                episode_id=None,
                namespace=None,
                content=None,
                similarity=None if match is None else float(match["similarity"]),
                applied=False,
            )
        cascade = Cascade()
        applied = False
        reason = f"forgotten: {text[:200]}"
        # the preview runs the real cascade inside a savepoint and rolls it back, so it
        # reports exactly what forgetting would withdraw
        with tx.conn.transaction() as savepoint:
            if tx.execute("episode_soft_delete", id=match["id"], reason=reason):
                cascade = lineage.withdraw_cascade(
                    tx, [("episode", int(match["id"]))], reason, settings=store.settings,
                    scope=None if all_ns else set(ids),
                )
                applied = not preview
            if preview:
                raise psycopg.Rollback(savepoint)
    return ForgetPreview(
        episode_id=int(match["id"]),
        namespace=match["namespace"],
        content=match["content"],
        similarity=float(match["similarity"]),
        applied=applied,
        withdrawn_fact_ids=cascade.withdrawn_fact_ids,
        recheck_fact_ids=cascade.recheck_fact_ids,
    )


def purge(store: Store, episode_id: int, namespaces: Sequence[str] | None = None) -> EpisodePurge:
    """Erase one episode (forgotten or not) and everything derived from it (``erasure.erase``)."""
    with store.db.transaction() as tx:
        row = _load(tx, episode_id, namespaces, include_deleted=True)
        ident = int(row["id"])
        erased = erasure.erase(tx, store, [("episode", ident)], scope=scope_ids(tx, namespaces))
    return EpisodePurge(episode_id=ident, namespace=row["namespace"], purged=True, erased=erased)


def purge_preview(store: Store, episode_id: int, namespaces: Sequence[str] | None = None) -> ErasurePreview:
    """What ``purge`` would erase, by running it and rolling it back (``erasure.rehearse``)."""
    with store.db.transaction() as tx:
        row = _load(tx, episode_id, namespaces, include_deleted=True)
        root = ("episode", int(row["id"]))
        scope = scope_ids(tx, namespaces)
        erased = erasure.rehearse(tx, lambda: erasure.erase_rows(tx, store, [root], scope=scope).rows)
        return erasure.preview(tx, root, erased, scope)
