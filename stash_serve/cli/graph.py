"""The knowledge graph: ``stash relationships``, ``patterns`` and ``causal create|list|trace|delete``.

The commands are derived from ``stash_pipeline.operations.graph``; what is written here
is how their answers read at a shell.
"""

from __future__ import annotations

from typing import Any

import click

from stash_pipeline.operations import graph as ops
from stash_serve.cli.derive import command, sentence
from stash_serve.cli.output import emit_json, show


@click.group("causal")
def causal_group() -> None:
    """Create, list, trace and delete cause→effect links between facts (and failures).

    \b
    Example:
      stash causal trace 7 --direction forward --mermaid
    """


def _created(link: Any, as_json: bool, args: Any) -> None:
    if as_json:
        emit_json(link)
        return
    effect = f"fact {link.effect_fact_id}" if link.effect_fact_id else f"failure {link.effect_failure_id}"
    click.echo(f"created causal link {link.id}: fact {link.cause_fact_id} → {effect}")


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


def _traced(trace: Any, as_json: bool, args: Any, as_mermaid: bool = False) -> None:
    if as_mermaid:
        click.echo(mermaid(trace.steps, trace.fact_id))
    else:
        show(trace.steps, as_json, ops.STEP_COLUMNS)


relationships_command = command(ops.QUERY_RELATIONSHIPS)
patterns_command = command(ops.QUERY_PATTERNS)
causal_group.add_command(command(ops.CREATE_CAUSAL_LINK, render=_created))
causal_group.add_command(command(ops.LIST_CAUSAL_LINKS))
causal_group.add_command(
    command(
        ops.TRACE_CAUSAL_CHAIN, render=_traced,
        extra=(click.Option(["--mermaid", "as_mermaid"], is_flag=True, help="Print a Mermaid `graph TD` diagram."),),
    )
)
causal_group.add_command(command(ops.DELETE_CAUSAL_LINK, render=sentence(lambda r, a: f"deleted causal link {r.id}")))

COMMANDS = (relationships_command, patterns_command, causal_group)
