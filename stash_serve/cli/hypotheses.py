"""``stash hypothesis create|list|show|test|refine|confirm|reject|delete``, derived from
``stash_pipeline.operations.hypotheses``."""

from __future__ import annotations

from typing import Any

import click

from stash_pipeline.operations import hypotheses as ops
from stash_serve.cli.derive import command, sentence
from stash_serve.cli.output import emit_json


@click.group("hypothesis")
def hypothesis_group() -> None:
    """Hypotheses: proposed → testing → confirmed | rejected, with an evidence log.

    \b
    Example:
      stash hypothesis create "Friday deploys cause more incidents" -n /projects/x --verification-plan "compare incident rates"
    """


def _out(verb: str) -> Any:
    return sentence(lambda h, a: f"{verb} hypothesis {h.id} ({h.status}, confidence {h.confidence:.2f})")


def _confirmed(result: Any, as_json: bool, args: Any) -> None:
    if as_json:
        emit_json(result)
        return
    fact_id = result.fact.get("id") if result.fact else None
    suffix = f"; recorded as fact {fact_id}" if fact_id is not None else ""
    click.echo(f"confirmed hypothesis {result.hypothesis.id}{suffix}")


for _command in (
    command(ops.CREATE_HYPOTHESIS, render=_out("created")),
    command(ops.LIST_HYPOTHESES),
    command(ops.SHOW_HYPOTHESIS),
    command(ops.TEST_HYPOTHESIS, render=_out("testing")),
    command(ops.REFINE_HYPOTHESIS, render=_out("refined")),
    command(ops.CONFIRM_HYPOTHESIS, render=_confirmed),
    command(ops.REJECT_HYPOTHESIS, render=_out("rejected")),
    command(ops.DELETE_HYPOTHESIS, render=sentence(lambda r, a: f"deleted hypothesis {r.id}")),
):
    hypothesis_group.add_command(_command)

COMMANDS = (hypothesis_group,)
