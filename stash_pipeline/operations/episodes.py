"""Episode operations: remember, remember_batch, get_episode, forget, purge_episode.

The library side is ``stash_pipeline.memory.episodes`` (imported inside each call, so
the declarations load without the database layer). remember_batch has no command: at a
shell, ``stash import`` reads many episodes from a file.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from stash_pipeline.memory import validate
from stash_pipeline.models import Episode, EpisodePurge, ForgetPreview, Remembered, RememberedBatch
from stash_pipeline.operations.base import Arguments, CliView, Operation, iso_time
from stash_pipeline.operations.fields import Metadata, Namespace, Namespaces, RecordId, Timestamp


class Remember(Arguments):
    content: Annotated[str, Field(description="What to remember: one durable, self-contained statement.")]
    namespace: Namespace
    kind: Annotated[
        str, Field(description="observation, decision, preference, correction, lesson, session_summary, …")
    ] = "observation"
    metadata: Metadata = None
    occurred_at: Timestamp = None
    idempotency_key: Annotated[str | None, Field(description="A retry with the same key returns the same episode.")] = None


def _remember(store: Any, a: Remember, namespace: str) -> Remembered:
    from stash_pipeline.memory import episodes

    return episodes.remember(
        store, namespace, a.content, occurred_at=a.occurred_at, kind=a.kind, metadata=a.metadata,
        idempotency_key=a.idempotency_key,
    )


REMEMBER = Operation(
    name="remember",
    description="Store one episode in an exact namespace. Returns its id and whether it was new.",
    arguments=Remember,
    call=_remember,
    right="write",
    reach="namespace",
    effect="write",
    result=Remembered,
    cli=CliView(
        path=("remember",),
        summary="Store an episode (CONTENT, or - to read it from stdin). No model is called.",
        example='stash remember "The deploy uses blue-green on Fridays" -n /projects/x\n'
        "git log -1 --format=%B | stash remember - -n /projects/x --kind commit",
        arguments={"content": "CONTENT"},
        stdin=("content",),
    ),
)


class BatchEpisode(BaseModel):
    """One episode of a remember_batch call."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(description="What happened or was learned.")
    kind: str = Field("observation", description="Episode kind, e.g. observation, decision, session_summary.")
    occurred_at: Annotated[
        str | None, Field(description="ISO 8601 time it happened (default now)."), AfterValidator(iso_time)
    ] = None
    metadata: dict[str, Any] | None = Field(None, description="Optional JSON object.")
    idempotency_key: str | None = Field(None, description="Makes a retry of this item safe.")


class RememberBatch(Arguments):
    items: Annotated[list[BatchEpisode], Field(description=f"Episodes to store (1-{validate.BATCH_MAX}), all or none.")]
    namespace: Namespace


def _remember_batch(store: Any, a: RememberBatch, namespace: str) -> RememberedBatch:
    from stash_pipeline.memory import episodes

    # the fields as parsed (occurred_at a datetime), not dumped back to text
    items = [{name: getattr(item, name) for name in BatchEpisode.model_fields if getattr(item, name) is not None}
             for item in a.items]
    return RememberedBatch(results=episodes.remember_batch(store, namespace, items))


REMEMBER_BATCH = Operation(
    name="remember_batch",
    description="Store several episodes in one namespace, all or none; one result per item, in order.",
    arguments=RememberBatch,
    call=_remember_batch,
    right="write",
    reach="namespace",
    effect="write",
    result=RememberedBatch,
)


class GetEpisode(Arguments):
    id: RecordId
    include_deleted: Annotated[bool, Field(description="Also return a forgotten episode.")] = False


def _get(store: Any, a: GetEpisode, namespaces: list[str] | None) -> Episode:
    from stash_pipeline.memory import episodes

    return episodes.get(store, a.id, namespaces, include_deleted=a.include_deleted)


GET_EPISODE = Operation(
    name="get_episode",
    description="One episode by id.",
    arguments=GetEpisode,
    call=_get,
    right="read",
    reach="by_id",
    effect="read",
    result=Episode,
    cli=CliView(path=("episode", "show"), example="stash episode show 42 --json", arguments={"id": "EPISODE_ID"}),
)


class Forget(Arguments):
    about: Annotated[str, Field(description="The stored wording of the memory to forget, as a search found it.")]
    namespaces: Namespaces = None
    threshold: Annotated[
        float | None, Field(description="Minimum similarity to match (default STASH_FORGET_THRESHOLD).", ge=0, le=1)
    ] = None
    preview: Annotated[bool, Field(description="True: only show what would be forgotten.")] = False


def _forget(store: Any, a: Forget, namespaces: list[str]) -> ForgetPreview:
    from stash_pipeline.memory import episodes

    return episodes.forget(store, a.about, namespaces, threshold=a.threshold, preview=a.preview)


FORGET = Operation(
    name="forget",
    description="Forget the one episode most similar to `about` (if similar enough); facts derived only from it are withdrawn.",
    arguments=Forget,
    call=_forget,
    right="write",
    reach="trees",
    effect="destructive",
    result=ForgetPreview,
    cli=CliView(
        path=("forget",),
        summary="Forget the episode most similar to ABOUT (if similar enough), withdrawing the facts derived only "
        "from it. Asks first unless --yes.",
        example='stash forget "the staging password" -n /projects/x --preview',
        arguments={"about": "ABOUT"},
    ),
)


class PurgeEpisode(Arguments):
    id: RecordId


def _purge(store: Any, a: PurgeEpisode, namespaces: list[str] | None) -> EpisodePurge:
    from stash_pipeline.memory import episodes

    return episodes.purge(store, a.id, namespaces)


PURGE_EPISODE = Operation(
    name="purge_episode",
    description="Erase an episode and all derived from it.",
    arguments=PurgeEpisode,
    call=_purge,
    right="write",
    reach="by_id",
    effect="destructive_idempotent",
    result=EpisodePurge,
    cli=CliView(
        path=("purge", "episode"),
        summary="Erase one episode and everything derived from it.",
        example="stash purge episode 42 --yes",
        arguments={"id": "EPISODE_ID"},
    ),
)

OPERATIONS = (REMEMBER, REMEMBER_BATCH, GET_EPISODE, FORGET, PURGE_EPISODE)
