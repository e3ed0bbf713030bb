"""``stash recall``: facts and episodes together, best first."""

from __future__ import annotations

import click

from stash_serve.cli import base
from stash_serve.cli.output import show

RECALL_COLUMNS = ("kind", "id", "namespace", "score", "content")


@click.command("recall")
@click.argument("query")
@base.namespaces_option()
@click.option("--limit", type=int, default=10, show_default=True, help="Maximum results (1-100).")
@click.option("--as-of", default=None, help="What was true at this time (event time, ISO 8601; default now).")
@click.option("--known-at", default=None, help="As Stash knew it at this time (system time, ISO 8601; default now).")
@click.option("--include-history", is_flag=True, help="Include retired facts with their validity.")
@click.option("--max-tokens", type=int, default=None, help="Stop adding results past this token budget.")
@base.json_option
def recall_command(
    query: str, namespaces: str, limit: int, as_of: str | None, known_at: str | None, include_history: bool,
    max_tokens: int | None, as_json: bool,
) -> None:
    """Search facts and episodes together (vector + full text, fused), best first.

    \b
    Example:
      stash recall "how do we deploy" -n /projects/x --json
    """
    from stash_pipeline.memory import recall

    when = base.parse_time(as_of, "--as-of")
    known = base.parse_time(known_at, "--known-at")
    hits = recall.recall(
        base.store(), query, namespaces,
        limit=limit, as_of=when, known_at=known,
        include_history=include_history, max_tokens=max_tokens,
    )
    show(hits, as_json, RECALL_COLUMNS)


COMMANDS = (recall_command,)
