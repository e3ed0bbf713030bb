"""The knowledge graph: ``stash relationships``, ``patterns`` and ``causal create|list|trace|delete``."""

from __future__ import annotations

from typing import Any

import click

from stash_serve.cli import base
from stash_serve.cli.output import emit_json, show

RELATIONSHIP_COLUMNS = ("id", "namespace", "from_entity", "relation_type", "to_entity", "confidence", "source_fact_id")
PATTERN_COLUMNS = ("id", "namespace", "confidence", "coherence", "content")
CAUSAL_COLUMNS = ("id", "namespace", "cause_fact_id", "effect_fact_id", "effect_failure_id", "confidence", "method")
STEP_COLUMNS = ("depth", "link_id", "cause_fact_id", "effect_fact_id", "effect_failure_id", "confidence", "effect")


def _times(as_of: str | None, known_at: str | None) -> dict[str, Any]:
    """Parse the two times before the store opens, so bad input fails without a database."""
    return {"as_of": base.parse_time(as_of, "--as-of"), "known_at": base.parse_time(known_at, "--known-at")}


@click.command("relationships")
@base.namespaces_option()
@click.option("--entity", default=None, help="Only relationships from or to this entity.")
@click.option("--relation-type", default=None, help="Only this relation type.")
@click.option("--include-withdrawn", is_flag=True, help="Also withdrawn relationships.")
@click.option("--as-of", default=None, help="Those holding at this time (event time, ISO 8601; default now).")
@click.option("--known-at", default=None, help="As Stash knew them at this time (system time, ISO 8601; default now).")
@base.limit_option()
@base.offset_option
@base.json_option
def relationships_command(
    namespaces: str, entity: str | None, relation_type: str | None, include_withdrawn: bool,
    as_of: str | None, known_at: str | None, limit: int, offset: int, as_json: bool,
) -> None:
    """List entity relationships extracted from facts.

    \b
    Example:
      stash relationships -n /projects/x --entity billing
    """
    from stash_pipeline.memory import graph

    times = _times(as_of, known_at)
    rows = graph.query_relationships(
        base.store(), namespaces, entity=entity, relation_type=relation_type,
        include_withdrawn=include_withdrawn, limit=limit, offset=offset, **times,
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
@click.option("--as-of", default=None, help="Those holding at this time (event time, ISO 8601; default now).")
@click.option("--known-at", default=None, help="As Stash knew them at this time (system time, ISO 8601; default now).")
@base.limit_option()
@base.offset_option
@base.json_option
def causal_list(
    namespaces: str, include_withdrawn: bool, as_of: str | None, known_at: str | None, limit: int, offset: int,
    as_json: bool,
) -> None:
    """List causal links.

    \b
    Example:
      stash causal list -n /projects/x
    """
    from stash_pipeline.memory import graph

    times = _times(as_of, known_at)
    rows = graph.list_causal_links(
        base.store(), namespaces, include_withdrawn=include_withdrawn, limit=limit, offset=offset, **times
    )
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
@click.option("--as-of", default=None, help="Those holding at this time (event time, ISO 8601; default now).")
@click.option("--known-at", default=None, help="As Stash knew them at this time (system time, ISO 8601; default now).")
@base.json_option
def causal_trace(
    fact_id: int, direction: str, depth: int, as_mermaid: bool, as_of: str | None, known_at: str | None,
    as_json: bool,
) -> None:
    """Follow the causal chain from (forward) or into (backward) a fact; cycle-safe.

    \b
    Example:
      stash causal trace 7 --direction backward --depth 5 --mermaid
    """
    from stash_pipeline.memory import graph

    times = _times(as_of, known_at)
    steps = graph.trace_causal_chain(base.store(), fact_id, direction=direction, max_depth=depth, **times)
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


COMMANDS = (relationships_command, patterns_command, causal_group)
