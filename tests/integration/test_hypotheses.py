"""Hypotheses: the state machine, confirm-as-fact with lineage, scope and the evidence log."""

from __future__ import annotations

import pytest

from stash_pipeline import errors
from stash_pipeline.memory import facts, hypotheses, lineage, namespaces
from stash_pipeline.operations.hypotheses import CREATE_HYPOTHESIS, LIST_HYPOTHESES, REFINE_HYPOTHESIS


@pytest.fixture
def ns(store):
    namespaces.create(store, "/p/a")
    namespaces.create(store, "/other")
    return store


def _fact(store, namespace, text):
    return facts.assert_fact(store, namespace, text).fact.id


def _new(store, namespace="/p/a", **kw):
    return hypotheses.create(store, namespace, "Cold starts cause the p99 spikes", "Compare p99 with warm pools", **kw)


# --- create / list / show ----------------------------------------------------------------


def test_create_with_source_facts(ns):
    store = ns
    f1 = _fact(store, "/p/a", "p99 spikes at 9am")
    f2 = _fact(store, "/p/a", "pods scale from zero at 9am")
    h = _new(store, confidence=0.4, source_fact_ids=[f2, f1])
    assert (h.namespace, h.status, h.method, h.confidence) == ("/p/a", "proposed", "asserted", pytest.approx(0.4))
    assert h.source_fact_ids == sorted([f1, f2])
    assert h.verification_plan == "Compare p99 with warm pools"
    with store.db.transaction() as tx:
        parents = lineage.parents_of(tx, "hypothesis", h.id)
    assert sorted(p.id for p in parents) == sorted([f1, f2])


@pytest.mark.parametrize(
    ("args", "kwargs", "error"),
    [
        (("", "plan"), {}, errors.EmptyContent),
        (("idea", "   "), {}, errors.EmptyContent),
        (("idea", None), {}, errors.InvalidInput),
        (("idea", "plan"), {"source_fact_ids": [999999]}, errors.RecordNotFound),
    ],
)
def test_create_rejects_bad_input_and_writes_nothing(ns, args, kwargs, error):
    with pytest.raises(error):
        hypotheses.create(ns, "/p/a", *args, **kwargs)
    assert hypotheses.list_(ns) == []


@pytest.mark.parametrize(
    ("operation", "values"),
    [
        (CREATE_HYPOTHESIS, {"confidence": 2}),
        (CREATE_HYPOTHESIS, {"source_fact_ids": "1,x"}),
        (CREATE_HYPOTHESIS, {"source_fact_ids": [0]}),
        (REFINE_HYPOTHESIS, {"id": 1, "confidence": -0.1}),
        (LIST_HYPOTHESES, {"status": "open"}),
    ],
)
def test_arguments_are_parsed_by_the_operation(operation, values):
    """Shapes and bounds are the arguments model's to check; the library takes the parsed values."""
    base = {"content": "idea", "verification_plan": "plan", "namespace": "/p/a"} if operation is CREATE_HYPOTHESIS else {}
    with pytest.raises(errors.InvalidInput):
        operation.parse({**base, **values})


def test_create_rejects_source_facts_outside_the_tree_or_withdrawn(ns):
    store = ns
    foreign = _fact(store, "/other", "elsewhere")
    with pytest.raises(errors.RecordNotFound, match=f"source fact {foreign}"):
        _new(store, source_fact_ids=[foreign])
    gone = _fact(store, "/p/a", "retracted")
    facts.withdraw(store, gone, "wrong")
    with pytest.raises(errors.InvalidInput, match="withdrawn"):
        _new(store, source_fact_ids=[gone])
    with pytest.raises(errors.NamespaceNotFound):
        _new(store, "/missing")
    assert hypotheses.list_(store) == []


def test_create_uses_the_exact_namespace(ns):
    store = ns
    h = hypotheses.create(store, "/p", "idea", "plan")
    assert h.namespace == "/p"
    # a source fact in a descendant is inside /p's tree
    f = _fact(store, "/p/a", "evidence below")
    assert hypotheses.create(store, "/p", "idea 2", "plan", source_fact_ids=[f]).source_fact_ids == [f]


def test_list_filters_status_scope_and_validates(ns):
    store = ns
    a = _new(store)
    b = _new(store)
    c = _new(store, "/other")
    hypotheses.test(store, b.id)
    assert [h.id for h in hypotheses.list_(store)] == [b.id, c.id, a.id]  # most recently changed first
    assert [h.id for h in hypotheses.list_(store, ["/p"])] == [b.id, a.id]
    assert [h.id for h in hypotheses.list_(store, status="testing")] == [b.id]
    assert [h.id for h in hypotheses.list_(store, status="proposed", limit=1)] == [c.id]


def test_show_includes_evidence_and_scope(ns):
    store = ns
    f = _fact(store, "/p/a", "warm pools removed the spikes")
    h = _new(store, source_fact_ids=[f])
    with store.db.transaction() as tx:
        row = hypotheses.record_evidence(
            tx,
            hypothesis_id=h.id,
            fact_id=f,
            namespace_id=namespaces.resolve_id(tx, "/p/a"),
            verdict="supports",
            confidence=0.8,
            new_confidence=0.7,
            reasoning="spikes vanished with warm pools",
            action="updated",
        )
    shown = hypotheses.show(store, h.id)
    assert shown.source_fact_ids == [f]
    assert [(e.id, e.fact_id, e.verdict, e.reasoning) for e in shown.evidence] == [
        (row["id"], f, "supports", "spikes vanished with warm pools")
    ]
    assert hypotheses.show(store, h.id, namespaces=["/p"]).id == h.id
    with pytest.raises(errors.RecordNotFound):
        hypotheses.show(store, h.id, namespaces=["/other"])
    with pytest.raises(errors.RecordNotFound):
        hypotheses.show(store, 999999)


# --- transitions -------------------------------------------------------------------------


def test_mcp_style_flow_test_then_confirm_creates_a_fact_with_lineage(ns):
    store = ns
    f = _fact(store, "/p/a", "p99 spikes at 9am")
    h = _new(store, confidence=0.85, source_fact_ids=[f])
    tested = hypotheses.test(store, h.id)
    assert tested.status == "testing" and tested.tested_at is not None
    out = hypotheses.confirm(store, h.id)
    hyp, fact = out.hypothesis, out.fact
    assert hyp.status == "confirmed" and hyp.confirmed_at is not None
    assert hyp.confirmed_fact_id == fact["id"]
    stored = facts.get(store, fact["id"])
    assert (stored.content, stored.origin, stored.namespace) == (h.content, "hypothesis", "/p/a")
    assert stored.confidence == pytest.approx(0.85) and stored.current is True
    with store.db.transaction() as tx:
        parents = {(p.kind, p.id) for p in lineage.parents_of(tx, "fact", fact["id"])}
    assert parents == {("hypothesis", h.id), ("fact", f)}
    assert "embedding" not in fact


def test_confirm_from_proposed_tells_to_test_first(ns):
    store = ns
    h = _new(store)
    with pytest.raises(errors.InvalidTransition) as info:
        hypotheses.confirm(store, h.id)
    message = str(info.value)
    assert "proposed → confirmed" in message
    assert "testing (test)" in message and "Test it first" in message
    assert hypotheses.show(store, h.id).status == "proposed"
    assert facts.query(store, "/p/a", origin="hypothesis") == []


def test_refine_sends_a_tested_hypothesis_back_to_proposed(ns):
    store = ns
    h = _new(store)
    hypotheses.test(store, h.id)
    refined = hypotheses.refine(store, h.id, content="Cold starts on Mondays", confidence=0.3)
    assert refined.status == "proposed"
    assert (refined.content, refined.verification_plan, refined.confidence) == (
        "Cold starts on Mondays", "Compare p99 with warm pools", pytest.approx(0.3)
    )
    # refine with nothing changed still works; confidence 0 is a value, not "keep"
    hypotheses.test(store, h.id)
    again = hypotheses.refine(store, h.id, verification_plan="Run a Monday canary", confidence=0)
    assert (again.status, again.verification_plan, again.confidence) == ("proposed", "Run a Monday canary", 0)
    with pytest.raises(errors.InvalidTransition, match="proposed → proposed"):
        hypotheses.refine(store, h.id, content="x")
    hypotheses.test(store, h.id)
    with pytest.raises(errors.EmptyContent):
        hypotheses.refine(store, h.id, content="  ")
    assert hypotheses.show(store, h.id).status == "testing"


def test_confirm_after_refine_uses_the_refined_text(ns):
    store = ns
    h = _new(store)
    hypotheses.test(store, h.id)
    hypotheses.refine(store, h.id, content="Refined claim")
    hypotheses.test(store, h.id)
    out = hypotheses.confirm(store, h.id, rationale="canary confirmed it")
    stored = facts.get(store, out.fact["id"])
    assert (stored.content, stored.rationale) == ("Refined claim", "canary confirmed it")


def test_reject_from_proposed_and_testing_and_final_states(ns):
    store = ns
    a, b = _new(store), _new(store)
    rejected = hypotheses.reject(store, a.id, "no correlation")
    assert (rejected.status, rejected.rejection_reason) == ("rejected", "no correlation")
    assert rejected.rejected_at is not None
    hypotheses.test(store, b.id)
    assert hypotheses.reject(store, b.id).rejection_reason is None
    for op in (hypotheses.test, hypotheses.confirm, hypotheses.reject):
        with pytest.raises(errors.InvalidTransition, match="rejected is final"):
            op(store, a.id)
    with pytest.raises(errors.InvalidTransition, match="rejected is final"):
        hypotheses.refine(store, a.id)


def test_confirmed_is_final(ns):
    store = ns
    h = _new(store)
    hypotheses.test(store, h.id)
    hypotheses.confirm(store, h.id)
    with pytest.raises(errors.InvalidTransition, match="confirmed → confirmed"):
        hypotheses.confirm(store, h.id)
    with pytest.raises(errors.InvalidTransition, match="confirmed is final"):
        hypotheses.reject(store, h.id)
    assert len(facts.query(store, "/p/a", origin="hypothesis")) == 1


def test_test_twice_is_invalid(ns):
    store = ns
    h = _new(store)
    hypotheses.test(store, h.id)
    with pytest.raises(errors.InvalidTransition, match="testing → testing"):
        hypotheses.test(store, h.id)


def test_deleted_hypotheses_cannot_be_acted_on(ns):
    store = ns
    h = _new(store)
    hypotheses.test(store, h.id)
    assert hypotheses.delete(store, h.id).to_json() == {"ok": True, "id": h.id}
    assert hypotheses.list_(store) == []
    for op in (hypotheses.show, hypotheses.test, hypotheses.confirm, hypotheses.reject, hypotheses.delete):
        with pytest.raises(errors.RecordNotFound):
            op(store, h.id)
    with pytest.raises(errors.RecordNotFound):
        hypotheses.refine(store, h.id, content="x")
    assert facts.query(store, "/p/a", origin="hypothesis") == []


def test_ids_from_another_namespace_are_rejected(ns):
    store = ns
    h = _new(store, "/other")
    for op in (hypotheses.test, hypotheses.confirm, hypotheses.reject, hypotheses.delete):
        with pytest.raises(errors.RecordNotFound):
            op(store, h.id, namespaces=["/p"])
    with pytest.raises(errors.RecordNotFound):
        hypotheses.refine(store, h.id, namespaces=["/p"])
    assert hypotheses.show(store, h.id).status == "proposed"
    assert hypotheses.test(store, h.id, namespaces=["/other"]).status == "testing"


# --- evidence log (consolidation entry point) --------------------------------------------


def test_record_evidence_is_idempotent_per_fact_and_writes_lineage(ns):
    store = ns
    f = _fact(store, "/p/a", "spikes persist with warm pools")
    h = _new(store)
    with store.db.transaction() as tx:
        ns_id = namespaces.resolve_id(tx, "/p/a")
        common = dict(hypothesis_id=h.id, fact_id=f, namespace_id=ns_id, confidence=0.9, new_confidence=0.2)
        first = hypotheses.record_evidence(tx, verdict="contradicts", reasoning="r1", action="rejected", **common)
        second = hypotheses.record_evidence(tx, verdict="supports", reasoning="r2", action=None, **common)
        parents = {(p.kind, p.id) for p in lineage.parents_of(tx, "hypothesis_evidence", first["id"])}
    assert first is not None and first["verdict"] == "contradicts"
    assert second is None
    assert parents == {("hypothesis", h.id), ("fact", f)}
    assert [e.verdict for e in hypotheses.show(store, h.id).evidence] == ["contradicts"]
    with store.db.transaction() as tx, pytest.raises(errors.InvalidInput, match="verdict"):
        hypotheses.record_evidence(tx, verdict="maybe", reasoning="", action=None, **common)


def test_stage_helpers_update_confidence_and_transitions(ns):
    store = ns
    h = _new(store)
    with store.db.transaction() as tx:
        row = hypotheses.load(tx, h.id, lock=True)
        hypotheses.set_confidence(tx, h.id, 0.65)
        hypotheses.test_tx(tx, row)
    shown = hypotheses.show(store, h.id)
    assert (shown.status, shown.confidence) == ("testing", pytest.approx(0.65))
    with store.db.transaction() as tx:
        row = hypotheses.load(tx, h.id, lock=True)
        hyp, fact = hypotheses.confirm_tx(tx, store, row)
    assert hyp.status == "confirmed" and facts.get(store, fact["id"]).origin == "hypothesis"
