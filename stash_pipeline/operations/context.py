"""Context operations: set_context, get_context, clear_context (a namespace's current focus).

The library side is ``stash_pipeline.memory.context`` (imported inside each call, so the
declarations load without the database layer).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field

from stash_pipeline.models import Context, ContextCleared, CurrentContext
from stash_pipeline.operations.base import Arguments, CliView, Operation, duration
from stash_pipeline.operations.fields import Namespace


class SetContext(Arguments):
    focus: Annotated[str, Field(description="What you are working on and what to pick up next.")]
    namespace: Namespace
    ttl: Annotated[
        str | None,
        Field(description="Lifetime, e.g. 2h."),
        AfterValidator(duration),  # parsed once, here: the library takes the timedelta
    ] = None


def _set(store: Any, a: SetContext, namespace: str) -> Context:
    from stash_pipeline.memory import context

    return context.set_(store, namespace, a.focus, ttl=a.ttl)


SET_CONTEXT = Operation(
    name="set_context",
    description="Set a namespace's current focus (replaces the last; expires after STASH_CONTEXT_TTL).",
    arguments=SetContext,
    call=_set,
    right="write",
    reach="namespace",
    effect="write_idempotent",
    result=Context,
    cli=CliView(
        path=("context", "set"),
        summary="Set the focus of a namespace (replaces the previous one).",
        example='stash context set "release 2.3 freeze" -n /projects/x --ttl 1h',
        arguments={"focus": "FOCUS"},
        # the agent's words are cut for its description budget
        help={"ttl": "Lifetime, e.g. 30m, 2h, 1d (default STASH_CONTEXT_TTL)."},
        stdin=("focus",),
    ),
)


class NamespaceOnly(Arguments):
    namespace: Namespace


def _get(store: Any, a: NamespaceOnly, namespace: str) -> CurrentContext:
    from stash_pipeline.memory import context

    return context.get(store, namespace)


GET_CONTEXT = Operation(
    name="get_context",
    description='A namespace\'s current, unexpired focus ({"context": null} if none).',
    arguments=NamespaceOnly,
    call=_get,
    right="read",
    reach="namespace",
    effect="read",
    result=CurrentContext,
    cli=CliView(
        path=("context", "get"),
        summary="Show the current focus of a namespace (nothing once expired).",
        example="stash context get -n /projects/x",
    ),
)


def _clear(store: Any, a: NamespaceOnly, namespace: str) -> ContextCleared:
    from stash_pipeline.memory import context

    return context.clear(store, namespace)


CLEAR_CONTEXT = Operation(
    name="clear_context",
    description="Clear a namespace's focus (when the work is done or the topic changes).",
    arguments=NamespaceOnly,
    call=_clear,
    right="write",
    reach="namespace",
    effect="destructive_idempotent",
    result=ContextCleared,
    cli=CliView(path=("context", "clear"), example="stash context clear -n /projects/x"),
)

OPERATIONS = (SET_CONTEXT, GET_CONTEXT, CLEAR_CONTEXT)
