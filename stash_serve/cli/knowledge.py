"""Structured knowledge: ``stash facts``, ``fact``, ``relationships``, ``patterns``,
``contradictions``, ``causal``, ``hypothesis``, ``goal`` and ``failure``."""

from __future__ import annotations

from typing import Any

import click

from stash_serve.cli import base
from stash_serve.cli.output import emit_json, fields, show

FACT_COLUMNS = ("id", "namespace", "origin", "confidence", "current", "valid_from", "content")
RELATIONSHIP_COLUMNS = ("id", "namespace", "from_entity", "relation_type", "to_entity", "confidence", "source_fact_id")
PATTERN_COLUMNS = ("id", "namespace", "confidence", "coherence", "content")
CONTRADICTION_COLUMNS = ("id", "namespace", "old_fact_id", "new_fact_id", "classification", "resolved", "explanation")
CAUSAL_COLUMNS = ("id", "namespace", "cause_fact_id", "effect_fact_id", "effect_failure_id", "confidence", "method")
STEP_COLUMNS = ("depth", "link_id", "cause_fact_id", "effect_fact_id", "effect_failure_id", "confidence", "effect")
HYPOTHESIS_COLUMNS = ("id", "namespace", "status", "confidence", "content")
GOAL_COLUMNS = ("id", "namespace", "parent_id", "status", "priority", "content")
FAILURE_COLUMNS = ("id", "namespace", "goal_id", "content", "lesson")


def _times(**values: str | None) -> dict[str, Any]:
    """Parse ISO options before the store opens, so bad input fails without a database."""
    return {name: base.parse_time(value, "--" + name.replace("_", "-")) for name, value in values.items()}


# --- facts ---------------------------------------------------------------------------


@click.command("facts")
@base.namespaces_option()
@click.option("--entity", default=None, help="Only facts about this entity.")
@click.option("--property", "property_", default=None, help="Only facts of this property.")
@click.option("--origin", default=None, help="Only facts of this origin (e.g. asserted, synthesized).")
@click.option("--since", default=None, help="Created at or after (ISO 8601).")
@click.option("--until", default=None, help="Created before (ISO 8601).")
@click.option("--include-history", is_flag=True, help="Include superseded, expired and withdrawn facts.")
@click.option("--as-of", default=None, help="Facts that were valid at this time (ISO 8601).")
@base.limit_option()
@base.offset_option
@base.json_option
def facts_command(
    namespaces: str, entity: str | None, property_: str | None, origin: str | None, since: str | None,
    until: str | None, include_history: bool, as_of: str | None, limit: int, offset: int, as_json: bool,
) -> None:
    """List facts, newest first (current ones only unless --include-history or --as-of).

    \b
    Example:
      stash facts -n /projects/x --entity deploy --json
    """
    from stash_pipeline.memory import facts

    times = _times(since=since, until=until, as_of=as_of)
    rows = facts.query(
        base.store(), namespaces, entity=entity, property=property_, origin=origin,
        include_history=include_history, limit=limit, offset=offset, **times,
    )
    show(rows, as_json, FACT_COLUMNS)


@click.group("fact")
def fact_group() -> None:
    """Show, assert, withdraw or purge one fact.

    \b
    Example:
      stash fact assert "Deploys happen on Fridays" -n /projects/x --entity deploy --property day --value friday
    """


@fact_group.command("show")
@click.argument("fact_id", type=int)
@click.option("--lineage", is_flag=True, help="Also list where it came from and what was derived from it.")
@base.json_option
def fact_show(fact_id: int, lineage: bool, as_json: bool) -> None:
    """Show one fact in any state (current, superseded, withdrawn).

    \b
    Example:
      stash fact show 7 --lineage
    """
    from stash_pipeline.memory import facts

    store = base.store()
    if not lineage:
        show(facts.get(store, fact_id), as_json)
        return
    result = facts.get_with_lineage(store, fact_id)
    if as_json:
        emit_json(result)
        return
    fields(result["fact"])
    for key in ("parents", "children"):
        click.echo(f"{key}:")
        items = result.get(key) or []
        if not items:
            click.echo("  (none)")
        for item in items:
            click.echo("  - " + " ".join(f"{k}={v}" for k, v in dict(item).items() if v is not None))


@fact_group.command("assert")
@click.argument("content")
@base.namespace_option()
@click.option("--entity", default=None, help="Entity the fact is about (with --property).")
@click.option("--property", "property_", default=None, help="Property of the entity (with --entity).")
@click.option("--value", default=None, help="Value of the property.")
@click.option("--confidence", type=float, default=1.0, show_default=True, help="0-1.")
@click.option("--source-episode-ids", default=None, help="Comma-separated episode ids this fact comes from.")
@click.option("--supersede", is_flag=True, help="Retire current facts with the same entity/property and another value.")
@base.json_option
def fact_assert(
    content: str, namespace: str, entity: str | None, property_: str | None, value: str | None,
    confidence: float, source_episode_ids: str | None, supersede: bool, as_json: bool,
) -> None:
    """Add a fact yourself (origin "asserted"), optionally citing its source episodes.

    \b
    Example:
      stash fact assert "Deploys use blue-green" -n /projects/x --source-episode-ids 12,13
    """
    from stash_pipeline.memory import facts

    cited = base.parse_ids(source_episode_ids, "--source-episode-ids")
    result = facts.assert_fact(
        base.store(), namespace, base.read_content(content), entity=entity, property=property_, value=value,
        confidence=confidence, source_episode_ids=cited, supersede=supersede,
    )
    if as_json:
        emit_json(result)
        return
    click.echo(f"asserted fact {result['fact'].id} in {result['fact'].namespace}")
    for contradiction in result.get("contradictions") or []:
        click.echo(f"  contradicts fact {contradiction.old_fact_id} (contradiction {contradiction.id})")
    if result.get("superseded_fact_ids"):
        click.echo(f"  superseded facts {', '.join(map(str, result['superseded_fact_ids']))}")


@fact_group.command("withdraw")
@click.argument("fact_id", type=int)
@click.option("--reason", required=True, help="Why it no longer holds (kept with the fact).")
@base.json_option
def fact_withdraw(fact_id: int, reason: str, as_json: bool) -> None:
    """Withdraw a fact (kept as history) and what was derived only from it.

    \b
    Example:
      stash fact withdraw 7 --reason "we moved to canary deploys"
    """
    from stash_pipeline.memory import facts

    result = facts.withdraw(base.store(), fact_id, reason)
    if as_json:
        emit_json(result)
        return
    click.echo(f"withdrew fact {result['fact_id']}")
    _print_cascade(result.get("cascade"))


@fact_group.command("purge")
@click.argument("fact_id", type=int)
@base.yes_option
@base.json_option
@click.pass_context
def fact_purge(ctx: click.Context, fact_id: int, yes: bool, as_json: bool) -> None:
    """Erase one fact for good (same as `stash purge fact`).

    \b
    Example:
      stash fact purge 7 --yes
    """
    from stash_serve.cli.memory import purge_fact

    ctx.invoke(purge_fact, fact_id=fact_id, yes=yes, as_json=as_json)


def _print_cascade(cascade: Any) -> None:
    if not cascade:
        return
    for key, value in dict(cascade).items():
        if value:
            click.echo(f"  {key.replace('_', ' ')}: {', '.join(map(str, value)) if isinstance(value, list) else value}")


# --- relationships and patterns ------------------------------------------------------------


@click.command("relationships")
@base.namespaces_option()
@click.option("--entity", default=None, help="Only relationships from or to this entity.")
@click.option("--relation-type", default=None, help="Only this relation type.")
@click.option("--include-withdrawn", is_flag=True, help="Also withdrawn relationships.")
@base.limit_option()
@base.offset_option
@base.json_option
def relationships_command(
    namespaces: str, entity: str | None, relation_type: str | None, include_withdrawn: bool,
    limit: int, offset: int, as_json: bool,
) -> None:
    """List entity relationships extracted from facts.

    \b
    Example:
      stash relationships -n /projects/x --entity billing
    """
    from stash_pipeline.memory import graph

    rows = graph.query_relationships(
        base.store(), namespaces, entity=entity, relation_type=relation_type,
        include_withdrawn=include_withdrawn, limit=limit, offset=offset,
    )
    show(rows, as_json, RELATIONSHIP_COLUMNS)


@click.command("patterns")
@base.namespaces_option()
@click.option("--include-withdrawn", is_flag=True, help="Also withdrawn patterns.")
@base.limit_option()
@base.offset_option
@base.json_option
def patterns_command(namespaces: str, include_withdrawn: bool, limit: int, offset: int, as_json: bool) -> None:
    """List patterns abstracted from facts.

    \b
    Example:
      stash patterns -n /projects --json
    """
    from stash_pipeline.memory import graph

    rows = graph.query_patterns(base.store(), namespaces, include_withdrawn=include_withdrawn, limit=limit, offset=offset)
    show(rows, as_json, PATTERN_COLUMNS)


# --- contradictions ------------------------------------------------------------------------


@click.group("contradictions")
def contradictions_group() -> None:
    """List and resolve contradictions between facts.

    \b
    Example:
      stash contradictions list -n /projects/x
    """


@contradictions_group.command("list")
@base.namespaces_option()
@click.option("--all", "include_resolved", is_flag=True, help="Include resolved contradictions.")
@base.limit_option()
@base.offset_option
@base.json_option
def contradictions_list(namespaces: str, include_resolved: bool, limit: int, offset: int, as_json: bool) -> None:
    """List unresolved contradictions (all with --all).

    \b
    Example:
      stash contradictions list -n /projects/x --all --json
    """
    from stash_pipeline.memory import contradictions

    rows = contradictions.list_(base.store(), namespaces, include_resolved=include_resolved, limit=limit, offset=offset)
    show(rows, as_json, CONTRADICTION_COLUMNS)


@contradictions_group.command("resolve")
@click.argument("contradiction_id", type=int)
@click.option(
    "--action", required=True, type=click.Choice(["keep_new", "keep_old", "keep_both", "neither"]),
    help="keep_new retires the old fact, keep_old withdraws the new one, keep_both keeps both, neither withdraws both.",
)
@click.option("--note", default=None, help="Why (kept with the resolution).")
@base.json_option
def contradictions_resolve(contradiction_id: int, action: str, note: str | None, as_json: bool) -> None:
    """Resolve a contradiction with an action on its two facts.

    \b
    Example:
      stash contradictions resolve 3 --action keep_new --note "confirmed with the team"
    """
    from stash_pipeline.memory import contradictions

    result = contradictions.resolve(base.store(), contradiction_id, action, note=note)
    if as_json:
        emit_json(result)
        return
    click.echo(f"resolved contradiction {contradiction_id} ({action})")
    for key in ("old_fact", "new_fact"):
        fact = result.get(key)
        if fact is not None:
            state = "current" if fact.current else "retired"
            click.echo(f"  {key.replace('_', ' ')} {fact.id}: {state}")


# --- causal links --------------------------------------------------------------------------


@click.group("causal")
def causal_group() -> None:
    """Create, list, trace and delete cause→effect links between facts (and failures).

    \b
    Example:
      stash causal trace 7 --direction forward --mermaid
    """


@causal_group.command("create")
@base.namespace_option()
@click.option("--cause-id", type=int, required=True, help="The cause fact id.")
@click.option("--effect-id", type=int, default=None, help="The effect fact id.")
@click.option("--effect-failure-id", type=int, default=None, help="The effect failure id (instead of --effect-id).")
@click.option("--confidence", type=float, default=0.8, show_default=True, help="0-1.")
@click.option("--rationale", default=None, help="Why the cause leads to the effect.")
@base.json_option
def causal_create(
    namespace: str, cause_id: int, effect_id: int | None, effect_failure_id: int | None,
    confidence: float, rationale: str | None, as_json: bool,
) -> None:
    """Link a cause fact to an effect fact or failure.

    \b
    Example:
      stash causal create -n /projects/x --cause-id 7 --effect-failure-id 2 --confidence 0.9
    """
    from stash_pipeline.memory import graph

    link = graph.create_causal_link(
        base.store(), namespace, cause_id, effect_id=effect_id, effect_failure_id=effect_failure_id,
        confidence=confidence, rationale=rationale,
    )
    if as_json:
        emit_json(link)
    else:
        effect = f"fact {link.effect_fact_id}" if link.effect_fact_id else f"failure {link.effect_failure_id}"
        click.echo(f"created causal link {link.id}: fact {link.cause_fact_id} → {effect}")


@causal_group.command("list")
@base.namespaces_option()
@click.option("--include-withdrawn", is_flag=True, help="Also withdrawn links.")
@base.limit_option()
@base.offset_option
@base.json_option
def causal_list(namespaces: str, include_withdrawn: bool, limit: int, offset: int, as_json: bool) -> None:
    """List causal links.

    \b
    Example:
      stash causal list -n /projects/x
    """
    from stash_pipeline.memory import graph

    rows = graph.list_causal_links(base.store(), namespaces, include_withdrawn=include_withdrawn, limit=limit, offset=offset)
    show(rows, as_json, CAUSAL_COLUMNS)


def mermaid(steps: list[Any], start_fact_id: int) -> str:
    """A ``graph TD`` of traced steps; failure effects are drawn as their own node shape."""

    def label(text: str) -> str:
        text = " ".join(str(text).split())
        text = text if len(text) <= 50 else text[:49] + "…"
        return text.replace('"', "#quot;")

    lines = ["graph TD"]
    declared: set[str] = set()

    def node(kind: str, ident: int, text: str) -> str:
        name = f"{'F' if kind == 'fact' else 'X'}{ident}"
        if name not in declared:
            declared.add(name)
            shape = ('["', '"]') if kind == "fact" else ('{{"', '"}}')
            lines.append(f"  {name}{shape[0]}{kind} {ident}: {label(text)}{shape[1]}")
        return name

    if not steps:
        lines.append(f'  F{start_fact_id}["fact {start_fact_id}"]')
    for step in steps:
        cause = node("fact", step.cause_fact_id, step.cause)
        if step.effect_fact_id is not None:
            effect = node("fact", step.effect_fact_id, step.effect)
        else:
            effect = node("failure", step.effect_failure_id, step.effect)
        lines.append(f"  {cause} -->|{step.confidence:.2f}| {effect}")
    return "\n".join(lines)


@causal_group.command("trace")
@click.argument("fact_id", type=int)
@click.option("--direction", type=click.Choice(["forward", "backward"]), default="forward", show_default=True,
              help="forward: effects of the fact; backward: its causes.")
@click.option("--depth", type=int, default=10, show_default=True, help="Maximum chain length (1-25).")
@click.option("--mermaid", "as_mermaid", is_flag=True, help="Print a Mermaid `graph TD` diagram.")
@base.json_option
def causal_trace(fact_id: int, direction: str, depth: int, as_mermaid: bool, as_json: bool) -> None:
    """Follow the causal chain from (forward) or into (backward) a fact; cycle-safe.

    \b
    Example:
      stash causal trace 7 --direction backward --depth 5 --mermaid
    """
    from stash_pipeline.memory import graph

    steps = graph.trace_causal_chain(base.store(), fact_id, direction=direction, max_depth=depth)
    if as_mermaid:
        click.echo(mermaid(steps, fact_id))
    else:
        show(steps, as_json, STEP_COLUMNS)


@causal_group.command("delete")
@click.argument("link_id", type=int)
def causal_delete(link_id: int) -> None:
    """Delete a causal link.

    \b
    Example:
      stash causal delete 4
    """
    from stash_pipeline.memory import graph

    graph.delete_causal_link(base.store(), link_id)
    click.echo(f"deleted causal link {link_id}")


# --- hypotheses ----------------------------------------------------------------------------


@click.group("hypothesis")
def hypothesis_group() -> None:
    """Hypotheses: proposed → testing → confirmed | rejected, with an evidence log.

    \b
    Example:
      stash hypothesis create "Friday deploys cause more incidents" -n /projects/x --verification-plan "compare incident rates"
    """


@hypothesis_group.command("create")
@click.argument("content")
@base.namespace_option()
@click.option("--verification-plan", required=True, help="How the hypothesis will be checked.")
@click.option("--confidence", type=float, default=0.5, show_default=True, help="0-1.")
@click.option("--source-fact-ids", default=None, help="Comma-separated fact ids that inspired it.")
@base.json_option
def hypothesis_create(
    content: str, namespace: str, verification_plan: str, confidence: float, source_fact_ids: str | None, as_json: bool
) -> None:
    """Propose a hypothesis.

    \b
    Example:
      stash hypothesis create "Caching halves latency" -n /projects/x --verification-plan "A/B the cache"
    """
    from stash_pipeline.memory import hypotheses

    sources = base.parse_ids(source_fact_ids, "--source-fact-ids")
    result = hypotheses.create(
        base.store(), namespace, base.read_content(content), verification_plan,
        confidence=confidence, source_fact_ids=sources,
    )
    _hypothesis_out(result, as_json, "created")


def _hypothesis_out(record: Any, as_json: bool, verb: str) -> None:
    if as_json:
        emit_json(record)
    else:
        click.echo(f"{verb} hypothesis {record.id} ({record.status}, confidence {record.confidence:.2f})")


@hypothesis_group.command("list")
@base.namespaces_option()
@click.option("--status", type=click.Choice(["proposed", "testing", "confirmed", "rejected"]), default=None,
              help="Only this status.")
@base.limit_option()
@base.offset_option
@base.json_option
def hypothesis_list(namespaces: str, status: str | None, limit: int, offset: int, as_json: bool) -> None:
    """List hypotheses.

    \b
    Example:
      stash hypothesis list -n /projects/x --status testing
    """
    from stash_pipeline.memory import hypotheses

    show(hypotheses.list_(base.store(), namespaces, status=status, limit=limit, offset=offset), as_json, HYPOTHESIS_COLUMNS)


@hypothesis_group.command("show")
@click.argument("hypothesis_id", type=int)
@base.json_option
def hypothesis_show(hypothesis_id: int, as_json: bool) -> None:
    """Show a hypothesis with its evidence log.

    \b
    Example:
      stash hypothesis show 5
    """
    from stash_pipeline.memory import hypotheses

    show(hypotheses.show(base.store(), hypothesis_id), as_json)


@hypothesis_group.command("test")
@click.argument("hypothesis_id", type=int)
@base.json_option
def hypothesis_test(hypothesis_id: int, as_json: bool) -> None:
    """Start testing a proposed hypothesis (proposed → testing).

    \b
    Example:
      stash hypothesis test 5
    """
    from stash_pipeline.memory import hypotheses

    _hypothesis_out(hypotheses.test(base.store(), hypothesis_id), as_json, "testing")


@hypothesis_group.command("refine")
@click.argument("hypothesis_id", type=int)
@click.option("--content", default=None, help="New statement.")
@click.option("--verification-plan", default=None, help="New verification plan.")
@click.option("--confidence", type=float, default=None, help="New confidence (0-1).")
@base.json_option
def hypothesis_refine(
    hypothesis_id: int, content: str | None, verification_plan: str | None, confidence: float | None, as_json: bool
) -> None:
    """Refine a hypothesis under test; it goes back to proposed.

    \b
    Example:
      stash hypothesis refine 5 --content "Caching cuts p95 latency by a third" --confidence 0.6
    """
    from stash_pipeline.memory import hypotheses

    result = hypotheses.refine(
        base.store(), hypothesis_id, content=content, verification_plan=verification_plan, confidence=confidence
    )
    _hypothesis_out(result, as_json, "refined")


@hypothesis_group.command("confirm")
@click.argument("hypothesis_id", type=int)
@click.option("--rationale", default=None, help="Why it is confirmed.")
@base.json_option
def hypothesis_confirm(hypothesis_id: int, rationale: str | None, as_json: bool) -> None:
    """Confirm a hypothesis under test; it becomes a fact.

    \b
    Example:
      stash hypothesis confirm 5 --rationale "two weeks of A/B data"
    """
    from stash_pipeline.memory import hypotheses

    result = hypotheses.confirm(base.store(), hypothesis_id, rationale=rationale)
    if as_json:
        emit_json(result)
        return
    fact = result.get("fact")
    fact_id = (fact.get("id") if isinstance(fact, dict) else getattr(fact, "id", None)) if fact else None
    suffix = f"; recorded as fact {fact_id}" if fact_id is not None else ""
    click.echo(f"confirmed hypothesis {hypothesis_id}{suffix}")


@hypothesis_group.command("reject")
@click.argument("hypothesis_id", type=int)
@click.option("--reason", default=None, help="Why it is rejected.")
@base.json_option
def hypothesis_reject(hypothesis_id: int, reason: str | None, as_json: bool) -> None:
    """Reject a hypothesis.

    \b
    Example:
      stash hypothesis reject 5 --reason "no difference measured"
    """
    from stash_pipeline.memory import hypotheses

    _hypothesis_out(hypotheses.reject(base.store(), hypothesis_id, reason), as_json, "rejected")


@hypothesis_group.command("delete")
@click.argument("hypothesis_id", type=int)
def hypothesis_delete(hypothesis_id: int) -> None:
    """Delete a hypothesis.

    \b
    Example:
      stash hypothesis delete 5
    """
    from stash_pipeline.memory import hypotheses

    hypotheses.delete(base.store(), hypothesis_id)
    click.echo(f"deleted hypothesis {hypothesis_id}")


# --- goals -------------------------------------------------------------------------------


@click.group("goal")
def goal_group() -> None:
    """Goals as a tree: create, update, complete (parents auto-complete), abandon, delete.

    \b
    Example:
      stash goal create "Ship billing v2" -n /projects/x --priority 2
    """


@goal_group.command("create")
@click.argument("content")
@base.namespace_option()
@click.option("--parent-id", type=int, default=None, help="Parent goal (same namespace tree).")
@click.option("--priority", type=int, default=0, show_default=True, help="Higher is more important.")
@base.json_option
def goal_create(content: str, namespace: str, parent_id: int | None, priority: int, as_json: bool) -> None:
    """Create a goal, optionally under a parent goal.

    \b
    Example:
      stash goal create "Migrate invoices" -n /projects/x --parent-id 1
    """
    from stash_pipeline.memory import goals

    goal = goals.create(base.store(), namespace, base.read_content(content), parent_id=parent_id, priority=priority)
    if as_json:
        emit_json(goal)
    else:
        click.echo(f"created goal {goal.id} in {goal.namespace}")


@goal_group.command("list")
@base.namespaces_option()
@click.option("--status", type=click.Choice(["active", "completed", "abandoned"]), default=None, help="Only this status.")
@click.option("--parent-id", type=int, default=None, help="Only sub-goals of this goal.")
@click.option("--top-level", is_flag=True, help="Only goals without a parent.")
@base.limit_option()
@base.offset_option
@base.json_option
def goal_list(
    namespaces: str, status: str | None, parent_id: int | None, top_level: bool, limit: int, offset: int, as_json: bool
) -> None:
    """List goals.

    \b
    Example:
      stash goal list -n /projects/x --status active
    """
    from stash_pipeline.memory import goals

    rows = goals.list_(
        base.store(), namespaces, status=status, parent_id=parent_id, top_level_only=top_level, limit=limit, offset=offset
    )
    show(rows, as_json, GOAL_COLUMNS)


@goal_group.command("show")
@click.argument("goal_id", type=int)
@base.json_option
def goal_show(goal_id: int, as_json: bool) -> None:
    """Show a goal with its sub-goal counts and notes.

    \b
    Example:
      stash goal show 1
    """
    from stash_pipeline.memory import goals

    show(goals.show(base.store(), goal_id), as_json)


@goal_group.command("update")
@click.argument("goal_id", type=int)
@click.option("--content", default=None, help="New text.")
@click.option("--priority", type=int, default=None, help="New priority (0 is allowed).")
@click.option("--note", default=None, help="Append a progress note.")
@base.json_option
def goal_update(goal_id: int, content: str | None, priority: int | None, note: str | None, as_json: bool) -> None:
    """Change a goal's text or priority, or append a note.

    \b
    Example:
      stash goal update 1 --priority 0 --note "deprioritised after the freeze"
    """
    from stash_pipeline.memory import goals

    goal = goals.update(base.store(), goal_id, content=content, priority=priority, note=note)
    if as_json:
        emit_json(goal)
    else:
        click.echo(f"updated goal {goal.id} (priority {goal.priority})")


def _finish(verb: str, result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit_json(result)
        return
    goal = result["goal"]
    click.echo(f"{verb} goal {goal.id}")
    if result.get("auto_completed"):
        click.echo(f"  also completed parent goal(s) {', '.join(map(str, result['auto_completed']))}")


@goal_group.command("complete")
@click.argument("goal_id", type=int)
@click.option("--note", "--notes", "note", default=None, help="Closing note.")
@base.json_option
def goal_complete(goal_id: int, note: str | None, as_json: bool) -> None:
    """Complete a goal; parents whose sub-goals are all done complete too.

    \b
    Example:
      stash goal complete 3 --note "merged and deployed"
    """
    from stash_pipeline.memory import goals

    _finish("completed", goals.complete(base.store(), goal_id, note=note), as_json)


@goal_group.command("abandon")
@click.argument("goal_id", type=int)
@click.option("--note", "--notes", "note", default=None, help="Why it was abandoned.")
@base.json_option
def goal_abandon(goal_id: int, note: str | None, as_json: bool) -> None:
    """Abandon a goal.

    \b
    Example:
      stash goal abandon 3 --note "superseded by the new plan"
    """
    from stash_pipeline.memory import goals

    _finish("abandoned", goals.abandon(base.store(), goal_id, note=note), as_json)


@goal_group.command("delete")
@click.argument("goal_id", type=int)
@base.yes_option
def goal_delete(goal_id: int, yes: bool) -> None:
    """Delete a goal and its sub-goals (asks first).

    \b
    Example:
      stash goal delete 3 --yes
    """
    from stash_pipeline.memory import goals

    store = base.store()
    goal = goals.show(store, goal_id)
    if not yes:
        counts = goal.sub_goals or {}
        click.echo(f"goal {goal.id}: {goal.content[:200]} ({counts.get('total', 0)} sub-goal(s))", err=True)
    base.confirm("delete it and its sub-goals?", yes)
    result = goals.delete(store, goal_id)
    deleted = result.get("deleted_ids") or [goal_id]
    click.echo(f"deleted goal(s) {', '.join(map(str, deleted))}")


# --- failures ----------------------------------------------------------------------------


@click.group("failure")
def failure_group() -> None:
    """Record what went wrong, why, and the lesson.

    \b
    Example:
      stash failure create "Deploy broke checkout" -n /projects/x --reason "missing migration" --lesson "migrate first"
    """


@failure_group.command("create")
@click.argument("content")
@base.namespace_option()
@click.option("--reason", required=True, help="Why it failed.")
@click.option("--lesson", required=True, help="What to do differently.")
@click.option("--goal-id", type=int, default=None, help="The goal it belongs to.")
@base.json_option
def failure_create(content: str, namespace: str, reason: str, lesson: str, goal_id: int | None, as_json: bool) -> None:
    """Record a failure.

    \b
    Example:
      stash failure create "Cache stampede at 9am" -n /projects/x --reason "cold cache" --lesson "pre-warm"
    """
    from stash_pipeline.memory import failures

    failure = failures.create(base.store(), namespace, base.read_content(content), reason, lesson, goal_id=goal_id)
    if as_json:
        emit_json(failure)
    else:
        click.echo(f"recorded failure {failure.id} in {failure.namespace}")


@failure_group.command("list")
@base.namespaces_option()
@click.option("--goal-id", type=int, default=None, help="Only failures of this goal.")
@base.limit_option()
@base.offset_option
@base.json_option
def failure_list(namespaces: str, goal_id: int | None, limit: int, offset: int, as_json: bool) -> None:
    """List failures.

    \b
    Example:
      stash failure list -n /projects/x
    """
    from stash_pipeline.memory import failures

    show(failures.list_(base.store(), namespaces, goal_id=goal_id, limit=limit, offset=offset), as_json, FAILURE_COLUMNS)


@failure_group.command("show")
@click.argument("failure_id", type=int)
@base.json_option
def failure_show(failure_id: int, as_json: bool) -> None:
    """Show one failure.

    \b
    Example:
      stash failure show 2
    """
    from stash_pipeline.memory import failures

    show(failures.show(base.store(), failure_id), as_json)


@failure_group.command("delete")
@click.argument("failure_id", type=int)
def failure_delete(failure_id: int) -> None:
    """Delete a failure.

    \b
    Example:
      stash failure delete 2
    """
    from stash_pipeline.memory import failures

    failures.delete(base.store(), failure_id)
    click.echo(f"deleted failure {failure_id}")


COMMANDS = (
    facts_command, fact_group, relationships_command, patterns_command, contradictions_group, causal_group,
    hypothesis_group, goal_group, failure_group,
)
