"""Namespace operations: init, create_namespace, list_namespaces, delete_namespace.

The library side is ``stash_pipeline.memory.namespaces`` (imported inside each call, so
the declarations load without the database layer). ``init`` and ``create_namespace``
reach the caller's whole scope: their answer depends on the token (a token without
/self is told so; a token's creations count against its hourly allowance). ``stash
namespace show`` (a namespace with its tree's row counts) has no tool and is written by
hand in ``stash_serve/cli/namespaces.py``.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, Field, StrictBool

from stash_pipeline.memory import validate
from stash_pipeline.models import Namespace as NamespaceRecord
from stash_pipeline.models import NamespaceDeletion, SelfTree
from stash_pipeline.operations.base import Arguments, CliView, Operation, Scope
from stash_pipeline.operations.fields import Limit, Namespaces, Offset
from stash_pipeline.operations.results import NamespaceCreated


class Init(Arguments):
    pass


def _init(store: Any, a: Init, scope: Scope) -> SelfTree:
    from stash_pipeline.memory import namespaces

    token = scope.token
    if token is not None and not (token.has("write") and token.covers("/self")):
        # init opens every session, so a token without /self gets an honest answer
        # rather than an error, and nothing is written.
        return SelfTree(
            ok=True, namespaces=[], namespaces_created=[], self_available=False,
            message="this token does not cover /self with write access; the self-model is "
            f"unavailable. You may use: {', '.join(token.namespaces)}",
        )
    return namespaces.init_self(store)


INIT = Operation(
    name="init",
    description="Start of every session: create the /self tree (capabilities, limits, preferences) if missing.",
    arguments=Init,
    call=_init,
    right="write",
    reach="scope",
    effect="write_idempotent",
    result=SelfTree,
    cli=CliView(
        path=("init",),
        summary="Create the /self tree (capabilities, limits, preferences) for the agent's self-model.",
        example="stash init",
    ),
)


class CreateNamespace(Arguments):
    namespace: Annotated[
        str,
        Field(description="Namespace path to create, e.g. /projects/x (parents are created too)."),
        AfterValidator(validate.slug),
    ]
    name: Annotated[str | None, Field(description="Display name (default: the path).")] = None
    description: Annotated[str | None, Field(description="What belongs here; always give one.")] = None


def _create(store: Any, a: CreateNamespace, scope: Scope) -> NamespaceCreated:
    from stash_pipeline.memory import namespaces

    path = scope.write(a.namespace)
    if scope.token is None:
        result = namespaces.create(store, path, a.name, a.description)
    else:
        result = namespaces.create_for_token(
            store, scope.token, path, a.name, a.description, allowance=scope.namespaces_created
        )
    record = result.namespace
    return NamespaceCreated(id=record.id, slug=record.slug, created=result.created, namespace=record)


CREATE_NAMESPACE = Operation(
    name="create_namespace",
    description="Create a namespace and any missing parents (mkdir -p); updates name/description if it exists.",
    arguments=CreateNamespace,
    call=_create,
    right="write",
    reach="scope",
    effect="write_idempotent",
    result=NamespaceCreated,
    cli=CliView(
        path=("namespace", "create"),
        example='stash namespace create /projects/x --description "deploys and incidents"',
        arguments={"namespace": "SLUG"},
    ),
)


class ListNamespaces(Arguments):
    namespaces: Namespaces = None
    limit: Limit = validate.LIST_LIMIT_DEFAULT
    offset: Offset = 0


def _list(store: Any, a: ListNamespaces, namespaces: list[str]) -> list[NamespaceRecord]:
    from stash_pipeline.memory.namespaces import list_

    return list_(store, namespaces, a.limit, a.offset)


LIST_NAMESPACES = Operation(
    name="list_namespaces",
    description="List namespaces, ordered by path.",
    arguments=ListNamespaces,
    call=_list,
    right="read",
    reach="trees",
    effect="read",
    result=NamespaceRecord,
    paged=True,
    cli=CliView(
        path=("namespace", "list"),
        example="stash namespace list -n /projects",
        columns=("id", "slug", "name", "description", "created_at"),
    ),
)


class DeleteNamespace(Arguments):
    namespace: Annotated[
        str,
        Field(description="Namespace path to delete, with all descendants and their records."),
        AfterValidator(validate.slug),
    ]
    # strict: a destructive switch must be a real JSON true, never "yes" or 1
    confirm: Annotated[
        StrictBool, Field(description="False (default) only reports what would be deleted; true deletes.")
    ] = False


def _delete(store: Any, a: DeleteNamespace, namespace: str) -> NamespaceDeletion:
    from stash_pipeline.memory import namespaces

    return namespaces.delete(store, namespace, confirm=a.confirm)


DELETE_NAMESPACE = Operation(
    name="delete_namespace",
    description="Delete a namespace tree and everything in it. Call once without confirm to see the counts.",
    arguments=DeleteNamespace,
    call=_delete,
    right="admin",
    reach="namespace",
    effect="destructive",
    result=NamespaceDeletion,
    cli=CliView(
        path=("namespace", "delete"),
        # at a shell the command asks instead (or --yes), after showing the counts
        summary="Delete a namespace tree and everything in it (asks first, showing the counts).",
        example="stash namespace delete /projects/old --yes",
        arguments={"namespace": "SLUG"},
        hidden=("confirm",),
    ),
)

OPERATIONS = (INIT, CREATE_NAMESPACE, LIST_NAMESPACES, DELETE_NAMESPACE)
