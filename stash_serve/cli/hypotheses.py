"""``stash hypothesis create|list|show|test|refine|confirm|reject|delete``."""

from __future__ import annotations

from typing import Any

import click

from stash_serve.cli import base
from stash_serve.cli.output import emit_json, show

HYPOTHESIS_COLUMNS = ("id", "namespace", "status", "confidence", "content")


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
    from stash_pipeline.memory.validate import record_ids

    sources = record_ids(source_fact_ids, "--source-fact-ids")
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


COMMANDS = (hypothesis_group,)
