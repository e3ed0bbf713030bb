"""Hypotheses: ideas the agent wants to verify, with a state machine and an evidence log.

State machine::

    proposed ──test──▶ testing ──confirm──▶ confirmed   (final; creates a fact)
       │                 │  └────reject───▶ rejected    (final)
       └─────reject──────┼───────────────▶ rejected
                         └──refine──▶ proposed

``refine`` sends a hypothesis back to proposed with new content; ``test`` is a tool
too, so an MCP-only agent can confirm; soft-deleted hypotheses are not found and cannot
be acted on; every by-id operation takes a ``namespaces`` scope; the verification plan must be non-empty and source facts
must exist in the namespace tree (they become lineage parents); ``confirm`` creates its
fact through ``facts.insert_fact`` with lineage to the hypothesis and its source facts,
in the same transaction as the status change.

``record_evidence`` (and the ``*_tx`` helpers) are the transaction-level entry points
for the hypothesis-evidence consolidation stage.

The functions that take the store take parsed values (``validate``'s module docstring says
which layer checks what): ids as ints, confidences within [0, 1], ``status`` one of
``validate.HYPOTHESIS_STATUSES``; they check the texts against the store's limits, the
source facts against the namespace tree and each move against the state machine.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from stash_pipeline import errors
from stash_pipeline.db.gateway import Row, Session
from stash_pipeline.memory import facts, lineage, validate
from stash_pipeline.memory.namespaces import get as get_namespace
from stash_pipeline.memory.namespaces import resolve_trees
from stash_pipeline.memory.paging import Page
from stash_pipeline.memory.scope import found_in_scope, scope_ids
from stash_pipeline.models import Confirmation, Deleted, Hypothesis, HypothesisEvidence
from stash_pipeline.store import Store

TRANSITIONS: dict[str, tuple[str, ...]] = {
    "proposed": ("testing", "rejected"),
    "testing": ("confirmed", "rejected", "proposed"),
    "confirmed": (),
    "rejected": (),
}
#: the operation that performs each move, for error messages
_VERB = {"testing": "test", "confirmed": "confirm", "rejected": "reject", "proposed": "refine"}
VERDICTS = ("supports", "weakens", "contradicts", "irrelevant")


# --- reads -------------------------------------------------------------------------------


def list_(
    store: Store,
    namespaces: Sequence[str] = ("/",),
    *,
    status: validate.HypothesisStatus | None = None,
    limit: int = validate.LIST_LIMIT_DEFAULT,
    offset: int = 0,
) -> list[Hypothesis]:
    """Non-deleted hypotheses in the namespace trees, most recently changed first."""
    return Page(limit, offset).in_trees(store, "hypothesis_list", Hypothesis, namespaces, status=status)


def show(store: Store, hypothesis_id: int, namespaces: Sequence[str] | None = None) -> Hypothesis:
    """One hypothesis with its source fact ids and its evidence log."""
    with store.db.transaction() as tx:
        row = load(tx, hypothesis_id, scope_ids(tx, namespaces))
        evidence = tx.all("hypothesis_evidence_for", hypothesis_id=hypothesis_id)
    return Hypothesis.from_row({**row, "evidence": [HypothesisEvidence.from_row(e) for e in evidence]})


# --- writes ------------------------------------------------------------------------------


def create(
    store: Store,
    namespace: str,
    content: str,
    verification_plan: str,
    *,
    confidence: float = 0.5,
    source_fact_ids: Sequence[int] = (),
) -> Hypothesis:
    """Propose a hypothesis in one exact namespace.

    ``source_fact_ids`` must name facts in that namespace's tree that are not withdrawn;
    they are recorded as lineage parents.
    """
    content = validate.content(store.settings, content)
    verification_plan = validate.content(store.settings, verification_plan, "verification_plan")
    sources = list(dict.fromkeys(source_fact_ids))
    with store.db.transaction() as tx:
        target = get_namespace(tx, namespace)
        tree = set(resolve_trees(tx, target["slug"]))
        found = {int(f["id"]): f for f in tx.all("knowledge_facts_by_ids", ids=sources)} if sources else {}
        for fact_id in sources:
            fact = found.get(fact_id)
            if fact is None or fact["namespace_id"] not in tree:
                raise errors.RecordNotFound(
                    f"source fact {fact_id} not found in namespace {target['slug']!r} or its descendants"
                )
            if fact["withdrawn_at"] is not None:
                raise errors.InvalidInput(f"source fact {fact_id} was withdrawn and cannot support a hypothesis")
        row = tx.one(
            "hypothesis_insert",
            namespace_id=target["id"],
            content=content,
            verification_plan=verification_plan,
            confidence=confidence,
            method="asserted",
        )
        assert row is not None
        lineage.add(tx, target["id"], "hypothesis", row["id"], [("fact", f) for f in sources])
        created = tx.one("hypothesis_get", id=row["id"])
    return Hypothesis.from_row(created)


def test(store: Store, hypothesis_id: int, namespaces: Sequence[str] | None = None) -> Hypothesis:
    """Start testing: proposed → testing."""
    with store.db.transaction() as tx:
        row = load(tx, hypothesis_id, scope_ids(tx, namespaces), lock=True)
        test_tx(tx, row)
        out = tx.one("hypothesis_get", id=hypothesis_id)
    return Hypothesis.from_row(out)


def refine(
    store: Store,
    hypothesis_id: int,
    *,
    content: str | None = None,
    verification_plan: str | None = None,
    confidence: float | None = None,
    namespaces: Sequence[str] | None = None,
) -> Hypothesis:
    """Rework a hypothesis under test and send it back: testing → proposed.

    Only the fields given change; ``None`` keeps the current value.
    """
    content = None if content is None else validate.content(store.settings, content)
    verification_plan = (
        None if verification_plan is None else validate.content(store.settings, verification_plan, "verification_plan")
    )
    with store.db.transaction() as tx:
        row = load(tx, hypothesis_id, scope_ids(tx, namespaces), lock=True)
        _check_move(row, "proposed")
        tx.execute(
            "hypothesis_refine",
            id=hypothesis_id,
            content=content,
            verification_plan=verification_plan,
            confidence=confidence,
        )
        out = tx.one("hypothesis_get", id=hypothesis_id)
    return Hypothesis.from_row(out)


def confirm(
    store: Store,
    hypothesis_id: int,
    *,
    rationale: str | None = None,
    namespaces: Sequence[str] | None = None,
) -> Confirmation:
    """Confirm a hypothesis under test (testing → confirmed) and record it as a fact.

    In one transaction: a fact (origin 'hypothesis', the hypothesis's content and
    confidence, lineage to the hypothesis and its source facts) is inserted and the
    hypothesis points at it. Returns the hypothesis and the fact's row.
    """
    rationale = validate.optional_text(store.settings, rationale, "rationale")
    # Validate and embed before the write transaction, so no row lock is held while
    # the embedder runs; the state is checked again under the lock.
    with store.db.transaction() as tx:
        scope = scope_ids(tx, namespaces)
        first = load(tx, hypothesis_id, scope)
        _check_move(first, "confirmed")
    embedding = store.embedder.embed_one(first["content"], [first["namespace"]])
    with store.db.transaction() as tx:
        row = load(tx, hypothesis_id, scope, lock=True)
        if row["content"] != first["content"]:  # refined in between: embed what we store
            embedding = store.embedder.embed_one(row["content"], [row["namespace"]])
        hypothesis, fact = confirm_tx(tx, store, row, embedding=embedding, rationale=rationale)
    return Confirmation(hypothesis=hypothesis, fact=fact)


def reject(
    store: Store, hypothesis_id: int, reason: str | None = None, *, namespaces: Sequence[str] | None = None
) -> Hypothesis:
    """Reject a hypothesis (proposed or testing → rejected, final)."""
    reason = validate.optional_text(store.settings, reason, "reason")
    with store.db.transaction() as tx:
        row = load(tx, hypothesis_id, scope_ids(tx, namespaces), lock=True)
        reject_tx(tx, row, reason)
        out = tx.one("hypothesis_get", id=hypothesis_id)
    return Hypothesis.from_row(out)


def delete(store: Store, hypothesis_id: int, namespaces: Sequence[str] | None = None) -> Deleted:
    """Soft-delete a hypothesis; afterwards it is not found and cannot be acted on.

    A fact created by confirming it stays (it is knowledge in its own right).
    """
    with store.db.transaction() as tx:
        load(tx, hypothesis_id, scope_ids(tx, namespaces), lock=True)
        tx.execute("hypothesis_soft_delete", id=hypothesis_id)
    return Deleted(ok=True, id=hypothesis_id)


# --- transaction-level helpers (also used by the hypothesis-evidence stage) ----------


def load(tx: Session, hypothesis_id: int, scope: set[int] | None = None, *, lock: bool = False) -> Row:
    """A live hypothesis row in scope, optionally locked; RecordNotFound otherwise."""
    if lock:
        tx.one("hypothesis_lock", id=hypothesis_id)
    return found_in_scope(tx.one("hypothesis_get", id=hypothesis_id), scope, f"hypothesis {hypothesis_id}")


def test_tx(tx: Session, row: Row) -> None:
    """proposed → testing on a locked row."""
    _check_move(row, "testing")
    tx.execute("hypothesis_set_testing", id=row["id"])


def reject_tx(tx: Session, row: Row, reason: str | None) -> None:
    """proposed/testing → rejected on a locked row."""
    _check_move(row, "rejected")
    tx.execute("hypothesis_set_rejected", id=row["id"], reason=reason)


def confirm_tx(
    tx: Session,
    store: Store,
    row: Row,
    *,
    embedding: np.ndarray | None = None,
    rationale: str | None = None,
    evidence_fact_id: int | None = None,
) -> tuple[Hypothesis, Row]:
    """testing → confirmed on a locked row, inserting the confirming fact in ``tx``.

    The fact holds from its sources' time: the earliest of the hypothesis's source facts
    and the confirming evidence fact (``evidence_fact_id``), now when there are none.
    """
    _check_move(row, "confirmed")
    parents = [("hypothesis", int(row["id"])), *[("fact", int(f)) for f in row["source_fact_ids"]]]
    fact = facts.insert_fact(
        tx,
        store,
        namespace_id=int(row["namespace_id"]),
        content=row["content"],
        origin="hypothesis",
        confidence=float(row["confidence"]),
        parents=parents,
        rationale=rationale,
        embedding=embedding,
        time_sources=[] if evidence_fact_id is None else [("fact", int(evidence_fact_id))],
    )
    tx.execute("hypothesis_set_confirmed", id=row["id"], fact_id=int(fact["id"]))
    out = tx.one("hypothesis_get", id=row["id"])
    return Hypothesis.from_row(out), fact


def set_confidence(tx: Session, hypothesis_id: int, confidence: float) -> None:
    """Set a hypothesis's confidence (evidence below the auto thresholds)."""
    tx.execute("hypothesis_set_confidence", id=hypothesis_id, confidence=validate.probability(confidence))


def record_evidence(
    tx: Session,
    *,
    hypothesis_id: int,
    fact_id: int | None,
    namespace_id: int,
    verdict: str,
    confidence: float,
    new_confidence: float | None,
    reasoning: str,
    action: str | None,
) -> Row | None:
    """Log one verdict on a hypothesis (idempotent per (hypothesis, fact)).

    Returns the inserted row, or None when that fact already has a verdict on that
    hypothesis. Lineage of the evidence row points at the hypothesis and the fact.
    """
    validate.one_of(verdict, VERDICTS, "verdict")
    row = tx.one(
        "hypothesis_insert_evidence",
        hypothesis_id=int(hypothesis_id),
        fact_id=None if fact_id is None else int(fact_id),
        namespace_id=int(namespace_id),
        verdict=verdict,
        confidence=validate.probability(confidence),
        new_confidence=None if new_confidence is None else validate.probability(new_confidence, "new_confidence"),
        reasoning=reasoning or "",
        action=action,
    )
    if row is None:
        return None
    parents: list[tuple[str, int]] = [("hypothesis", int(hypothesis_id))]
    if fact_id is not None:
        parents.append(("fact", int(fact_id)))
    lineage.add(tx, int(namespace_id), "hypothesis_evidence", int(row["id"]), parents)
    return row


def _check_move(row: Row, to: str) -> None:
    current = row["status"]
    allowed = TRANSITIONS[current]
    if to in allowed:
        return
    if allowed:
        moves = ", ".join(f"{s} ({_VERB[s]})" for s in allowed)
        message = (
            f"hypothesis {row['id']}: {current} → {to} is not allowed; "
            f"from {current} the allowed moves are: {moves}"
        )
    else:
        message = f"hypothesis {row['id']}: {current} → {to} is not allowed; {current} is final"
    next_step = None
    if current == "proposed" and to == "confirmed":
        message += ". Test it first: mark it as testing"
        next_step = errors.NextStep("test_hypothesis", {"id": row["id"]})
    raise errors.InvalidTransition(
        message, next_step=next_step, hypothesis_id=row["id"], status=current, to=to
    )
