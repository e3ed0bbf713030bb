"""``stash db start|stop|status|url`` (the embedded PostgreSQL) and ``stash migrate``."""

from __future__ import annotations

import click

from stash_serve.cli import base
from stash_serve.cli.output import emit_json, fields


def _external() -> bool:
    """With STASH_DATABASE_URL set there is nothing embedded to manage: say so."""
    settings = base.settings()
    if settings.embedded:
        return False
    click.echo("STASH_DATABASE_URL is set: Stash uses that server; the embedded database is not used.")
    return True


@click.group("db")
def db_group() -> None:
    """Manage the embedded PostgreSQL + pgvector server (data under STASH_HOME).

    Not needed when STASH_DATABASE_URL points at your own server. Commands that need
    the database start the embedded server on demand.

    \b
    Example:
      stash db start && stash db status
    """


@db_group.command("start")
def db_start() -> None:
    """Initialise (first time) and start the embedded server.

    \b
    Example:
      stash db start
    """
    if _external():
        return
    from stash_pipeline.db.embedded import EmbeddedServer

    status = EmbeddedServer(base.settings()).start()
    click.echo(f"embedded PostgreSQL running on 127.0.0.1:{status.port} (pid {status.pid}, data {status.data_dir})")


@db_group.command("stop")
def db_stop() -> None:
    """Stop the embedded server (fast shutdown).

    \b
    Example:
      stash db stop
    """
    if _external():
        return
    from stash_pipeline.db.embedded import EmbeddedServer

    stopped = EmbeddedServer(base.settings()).stop()
    click.echo("embedded PostgreSQL stopped" if stopped else "embedded PostgreSQL was not running")


@db_group.command("status")
@base.json_option
def db_status(as_json: bool) -> None:
    """Show whether the embedded server runs, its pid, port and data directory.

    \b
    Example:
      stash db status --json
    """
    if _external():
        return
    from stash_pipeline.db.embedded import EmbeddedServer

    status = EmbeddedServer(base.settings()).status()
    if as_json:
        emit_json(status.as_dict())
    else:
        fields(status.as_dict())


@db_group.command("url")
@click.option("--database", default="stash", show_default=True, help="Database name (stash or dagster).")
def db_url(database: str) -> None:
    """Print the DSN of the embedded database (it contains the password).

    \b
    Example:
      psql "$(stash db url)"
    """
    if _external():
        return
    from stash_pipeline.db.embedded import EmbeddedServer

    click.echo(EmbeddedServer(base.settings()).url(database))


@click.command("migrate")
def migrate_command() -> None:
    """Bring the database schema to the newest revision (idempotent).

    Starts the embedded server first when STASH_DATABASE_URL is unset.

    \b
    Example:
      stash migrate
    """
    from stash_pipeline.db.dsn import database_dsn
    from stash_pipeline.db.migrate import migrate

    settings = base.settings()
    before, after = migrate(settings, database_dsn(settings, start=True))
    if before == after:
        click.echo(f"schema already at revision {after}")
    else:
        click.echo(f"schema migrated: {before or '(empty)'} → {after}")


COMMANDS = (db_group, migrate_command)
