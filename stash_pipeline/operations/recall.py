"""Recall operations: recall (current facts and episodes ranked together).

The library side is the ``stash_pipeline.recall`` package (imported inside the call, so
the declaration loads without the database layer): the operation builds one
``RecallRequest`` and the package carries it through. The answer is what
``recall.answer`` shapes once for every surface: no null or empty fields,
``score_parts`` only on request, ``max_tokens`` counted on the serialised results, a fact
carrying its source episodes as ``sources``. ``RecallResult`` publishes that shape as the
tool's output schema; at a shell ``--json`` prints the ``results`` list.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from stash_pipeline.memory import validate
from stash_pipeline.operations.base import Arguments, CliView, Operation
from stash_pipeline.operations.fields import AsOf, KnownAt, Namespaces
from stash_pipeline.operations.results import RecallResult


class Recall(Arguments):
    query: Annotated[str, Field(description="What you want to know, in natural language.")]
    namespaces: Namespaces = None
    limit: Annotated[int, Field(description="Results to return.", ge=1, le=validate.RECALL_LIMIT_MAX)] = validate.RECALL_LIMIT_DEFAULT
    as_of: AsOf = None
    known_at: KnownAt = None
    include_history: Annotated[
        bool, Field(description="Also return retired (superseded, expired, withdrawn) facts.")
    ] = False
    max_tokens: Annotated[
        int | None, Field(description="Stop adding results past about this many tokens of the answer.", ge=1)
    ] = None
    context: Annotated[
        int,
        Field(description="Turns of the same session to include around each episode hit.", ge=0,
              le=validate.RECALL_CONTEXT_MAX),
    ] = validate.RECALL_CONTEXT_DEFAULT
    include_score_parts: Annotated[
        bool, Field(description="Also return each result's score parts and what it groups.")
    ] = False


def _recall(store: Any, a: Recall, namespaces: list[str]) -> dict[str, Any]:
    from stash_pipeline import recall

    # every other argument is a RecallRequest field of the same name
    options = {name: getattr(a, name) for name in type(a).model_fields if name not in ("query", "namespaces")}
    request = recall.RecallRequest.of(store.settings, a.query, namespaces, **options)
    return recall.answer(store, request)


RECALL = Operation(
    name="recall",
    description="Search memory: current facts and episodes ranked together (semantic + full text). "
    "Each result has a relevance in [0, 1]; below 0.3 it is probably off topic.",
    arguments=Recall,
    call=_recall,
    right="read",
    reach="trees",
    effect="read",
    result=RecallResult,
    output_schema=True,
    cli=CliView(
        path=("recall",),
        summary="Search facts and episodes together (vector + full text, fused), best first.",
        example='stash recall "how do we deploy" -n /projects/x --json',
        arguments={"query": "QUERY"},
        help={
            "limit": f"Maximum results (1-{validate.RECALL_LIMIT_MAX}).",
            "include_history": "Include retired facts with their validity.",
            "max_tokens": "Stop adding results past this token budget (counted on the JSON answer).",
            "context": f"Turns of the same session shown around each episode hit (0-{validate.RECALL_CONTEXT_MAX}).",
            "include_score_parts": "Also show each result's score parts and what it groups.",
        },
        columns=("kind", "id", "namespace", "score", "content"),
    ),
)

OPERATIONS = (RECALL,)
