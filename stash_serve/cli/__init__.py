"""The ``stash`` command line.

One module per subject, mirroring ``stash_pipeline.memory`` (``namespaces``,
``episodes``, ``interchange``, ``recall``, ``context``, ``facts``, ``entities``, ``graph``,
``contradictions``, ``hypotheses``, ``goals``, ``failures``), plus ``admin``, ``db``,
``consolidation`` and ``service``; each exports ``COMMANDS``, registered here on the root
group. Command modules import only click at module level and the library inside each
command, so ``stash --help``, ``stash version`` and ``stash config`` never touch the
database. Errors: ``stash_serve.cli.base.StashGroup`` prints ``error: <message>`` (exit 2
for the caller's mistakes, 1 otherwise; ``STASH_DEBUG=1`` shows the traceback).
"""

from __future__ import annotations

import click

from stash_serve.cli import (
    admin,
    consolidation,
    context,
    contradictions,
    db,
    entities,
    episodes,
    facts,
    failures,
    go_import,
    goals,
    graph,
    hypotheses,
    interchange,
    namespaces,
    recall,
    service,
)
from stash_serve.cli.base import StashGroup

__all__ = ["cli", "main"]


@click.group(
    cls=StashGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
def cli() -> None:
    """Stash: long-term memory for AI agents.

    Settings come from STASH_* variables and .env (see `stash config`). Without
    STASH_DATABASE_URL, commands use an embedded PostgreSQL under STASH_HOME.

    \b
    Example:
      stash migrate && stash namespace create /projects/x
      stash remember "The deploy uses blue-green on Fridays" -n /projects/x
      stash recall "how do we deploy" -n /projects/x
    """


for _module in (
    admin, db, namespaces, episodes, interchange, recall, context, facts, entities, graph, contradictions, hypotheses,
    goals, failures, consolidation, service, go_import,
):
    for _command in _module.COMMANDS:
        cli.add_command(_command)


def main() -> None:
    """Console entry point (``stash``)."""
    cli.main(prog_name="stash")
