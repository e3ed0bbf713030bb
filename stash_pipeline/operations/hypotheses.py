"""Hypothesis operations: list_hypotheses, create_hypothesis, show_hypothesis,
test_hypothesis, refine_hypothesis, confirm_hypothesis, reject_hypothesis, delete_hypothesis.

The library side is ``stash_pipeline.memory.hypotheses`` (imported inside each call, so
the declarations load without the database layer).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from stash_pipeline.memory import validate
from stash_pipeline.models import Confirmation, Deleted, Hypothesis
from stash_pipeline.operations.base import Arguments, CliView, Operation
from stash_pipeline.operations.fields import (
    Confidence,
    IdList,
    Limit,
    Namespace,
    Namespaces,
    Offset,
    RecordId,
)


class ListHypotheses(Arguments):
    namespaces: Namespaces = None
    status: Annotated[
        validate.HypothesisStatus | None, Field(description="Only this status.")
    ] = None
    limit: Limit = validate.LIST_LIMIT_DEFAULT
    offset: Offset = 0


def _list(store: Any, a: ListHypotheses, namespaces: list[str]) -> list[Hypothesis]:
    from stash_pipeline.memory import hypotheses

    return hypotheses.list_(store, namespaces, status=a.status, limit=a.limit, offset=a.offset)


LIST_HYPOTHESES = Operation(
    name="list_hypotheses",
    description="Hypotheses, most recently updated first.",
    arguments=ListHypotheses,
    call=_list,
    right="read",
    reach="trees",
    effect="read",
    result=Hypothesis,
    paged=True,
    cli=CliView(
        path=("hypothesis", "list"),
        example="stash hypothesis list -n /projects/x --status testing",
        columns=("id", "namespace", "status", "confidence", "content"),
    ),
)


class CreateHypothesis(Arguments):
    content: Annotated[str, Field(description="The belief to test, as one statement.")]
    verification_plan: Annotated[str, Field(description="How it will be confirmed or refuted (required).")]
    confidence: Confidence = 0.5
    namespace: Namespace
    source_fact_ids: IdList = None


def _create(store: Any, a: CreateHypothesis, namespace: str) -> Hypothesis:
    from stash_pipeline.memory import hypotheses

    return hypotheses.create(
        store, namespace, a.content, a.verification_plan, confidence=a.confidence,
        source_fact_ids=a.source_fact_ids or (),
    )


CREATE_HYPOTHESIS = Operation(
    name="create_hypothesis",
    description="Propose a hypothesis; then test_hypothesis → confirm_hypothesis or reject_hypothesis.",
    arguments=CreateHypothesis,
    call=_create,
    right="write",
    reach="namespace",
    effect="write",
    result=Hypothesis,
    cli=CliView(
        path=("hypothesis", "create"),
        example='stash hypothesis create "Caching halves latency" -n /projects/x --verification-plan "A/B the cache"',
        arguments={"content": "CONTENT"},
        stdin=("content",),
    ),
)


class HypothesisById(Arguments):
    id: RecordId


def _show(store: Any, a: HypothesisById, namespaces: list[str] | None) -> Hypothesis:
    from stash_pipeline.memory import hypotheses

    return hypotheses.show(store, a.id, namespaces=namespaces)


SHOW_HYPOTHESIS = Operation(
    name="show_hypothesis",
    description="One hypothesis with its evidence log.",
    arguments=HypothesisById,
    call=_show,
    right="read",
    reach="by_id",
    effect="read",
    result=Hypothesis,
    cli=CliView(path=("hypothesis", "show"), example="stash hypothesis show 5", arguments={"id": "HYPOTHESIS_ID"}),
)


def _test(store: Any, a: HypothesisById, namespaces: list[str] | None) -> Hypothesis:
    from stash_pipeline.memory import hypotheses

    return hypotheses.test(store, a.id, namespaces=namespaces)


TEST_HYPOTHESIS = Operation(
    name="test_hypothesis",
    description="Start testing a hypothesis (proposed → testing); needed before confirm_hypothesis.",
    arguments=HypothesisById,
    call=_test,
    right="write",
    reach="by_id",
    effect="write_idempotent",
    result=Hypothesis,
    cli=CliView(path=("hypothesis", "test"), example="stash hypothesis test 5", arguments={"id": "HYPOTHESIS_ID"}),
)


class RefineHypothesis(Arguments):
    id: RecordId
    content: Annotated[str | None, Field(description="New wording.")] = None
    verification_plan: Annotated[str | None, Field(description="New plan.")] = None
    confidence: Annotated[float | None, Field(description="New confidence 0-1.", ge=0, le=1)] = None


def _refine(store: Any, a: RefineHypothesis, namespaces: list[str] | None) -> Hypothesis:
    from stash_pipeline.memory import hypotheses

    return hypotheses.refine(
        store, a.id, content=a.content, verification_plan=a.verification_plan, confidence=a.confidence,
        namespaces=namespaces,
    )


REFINE_HYPOTHESIS = Operation(
    name="refine_hypothesis",
    description="Reword a hypothesis, its plan or confidence (a testing one goes back to proposed).",
    arguments=RefineHypothesis,
    call=_refine,
    right="write",
    reach="by_id",
    effect="write",
    result=Hypothesis,
    cli=CliView(
        path=("hypothesis", "refine"),
        example='stash hypothesis refine 5 --content "Caching cuts p95 latency by a third" --confidence 0.6',
        arguments={"id": "HYPOTHESIS_ID"},
    ),
)


class ConfirmHypothesis(Arguments):
    id: RecordId
    rationale: Annotated[str | None, Field(description="Why it holds.")] = None


def _confirm(store: Any, a: ConfirmHypothesis, namespaces: list[str] | None) -> Confirmation:
    from stash_pipeline.memory import hypotheses

    return hypotheses.confirm(store, a.id, rationale=a.rationale, namespaces=namespaces)


CONFIRM_HYPOTHESIS = Operation(
    name="confirm_hypothesis",
    description="Confirm a hypothesis under test; it becomes a fact (origin hypothesis). Returns both.",
    arguments=ConfirmHypothesis,
    call=_confirm,
    right="write",
    reach="by_id",
    effect="write",
    result=Confirmation,
    cli=CliView(
        path=("hypothesis", "confirm"),
        example='stash hypothesis confirm 5 --rationale "two weeks of A/B data"',
        arguments={"id": "HYPOTHESIS_ID"},
    ),
)


class RejectHypothesis(Arguments):
    id: RecordId
    reason: Annotated[str | None, Field(description="Why it is false; keeps it from being re-proposed.")] = None


def _reject(store: Any, a: RejectHypothesis, namespaces: list[str] | None) -> Hypothesis:
    from stash_pipeline.memory import hypotheses

    return hypotheses.reject(store, a.id, reason=a.reason, namespaces=namespaces)


REJECT_HYPOTHESIS = Operation(
    name="reject_hypothesis",
    description="Reject a proposed or testing hypothesis (final).",
    arguments=RejectHypothesis,
    call=_reject,
    right="write",
    reach="by_id",
    effect="write",
    result=Hypothesis,
    cli=CliView(
        path=("hypothesis", "reject"),
        example='stash hypothesis reject 5 --reason "no difference measured"',
        arguments={"id": "HYPOTHESIS_ID"},
    ),
)


def _delete(store: Any, a: HypothesisById, namespaces: list[str] | None) -> Deleted:
    from stash_pipeline.memory import hypotheses

    return hypotheses.delete(store, a.id, namespaces=namespaces)


DELETE_HYPOTHESIS = Operation(
    name="delete_hypothesis",
    description="Delete a hypothesis.",
    arguments=HypothesisById,
    call=_delete,
    right="write",
    reach="by_id",
    effect="destructive_idempotent",
    result=Deleted,
    cli=CliView(
        path=("hypothesis", "delete"), example="stash hypothesis delete 5", arguments={"id": "HYPOTHESIS_ID"}
    ),
)

OPERATIONS = (
    LIST_HYPOTHESES,
    CREATE_HYPOTHESIS,
    SHOW_HYPOTHESIS,
    TEST_HYPOTHESIS,
    REFINE_HYPOTHESIS,
    CONFIRM_HYPOTHESIS,
    REJECT_HYPOTHESIS,
    DELETE_HYPOTHESIS,
)
