"""Shared machinery of the ``stash`` CLI: the root group's error handling, the lazily
opened store, and parsers for the option types every command group uses.

Nothing here imports the database layer at module level: ``stash --help``, ``stash
version`` and ``stash config`` work when no database is reachable.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from stash_pipeline.config import Settings
    from stash_pipeline.errors import StashError
    from stash_pipeline.store import Store

#: Stash errors a caller caused (bad input, missing record, duplicate, no access) exit 2,
#: like click's own usage errors; everything else (configuration, database, model) exits 1.
CALLER_ERROR_CODES = 2
OTHER_ERROR_CODE = 1
INTERRUPTED_CODE = 130


def _debug() -> bool:
    return os.environ.get("STASH_DEBUG", "") not in ("", "0", "false", "no")


def exit_code_for(exc: BaseException) -> int:
    from stash_pipeline import errors

    caller = (errors.InvalidInput, errors.NotFound, errors.Conflict, errors.AccessDenied)
    return CALLER_ERROR_CODES if isinstance(exc, caller) else OTHER_ERROR_CODE


class StashGroup(click.Group):
    """A click group whose root turns Stash errors into one line on stderr."""

    def invoke(self, ctx: click.Context) -> Any:
        if ctx.parent is not None:  # only the root handles errors, once
            return super().invoke(ctx)
        from stash_pipeline.errors import StashError

        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except StashError as exc:
            if _debug():
                raise
            click.echo(f"error: {error_message(exc)}", err=True)
            ctx.exit(exit_code_for(exc))
        except KeyboardInterrupt:
            if _debug():
                raise
            ctx.exit(INTERRUPTED_CODE)
        except BrokenPipeError:
            # `stash facts | head`: the reader went away; not an error worth a traceback.
            sys.stderr.close()
            ctx.exit(OTHER_ERROR_CODE)
        except Exception as exc:
            if _debug():
                raise
            click.echo(
                f"error: unexpected {type(exc).__name__}: {exc} (set STASH_DEBUG=1 for a traceback)", err=True
            )
            ctx.exit(OTHER_ERROR_CODE)


#: the command that performs each NextStep action an error may carry, as typed at a shell
NEXT_STEP_COMMANDS: dict[str, Callable[[dict[str, Any]], str]] = {
    "create_namespace": lambda arguments: f"stash namespace create {shlex.quote(str(arguments['namespace']))}",
    "test_hypothesis": lambda arguments: f"stash hypothesis test {int(arguments['id'])}",
}


def error_message(exc: StashError) -> str:
    """An error's message with its remedy named as a stash command."""
    if exc.next_step is None:
        return exc.message
    return f"{exc.message} ({NEXT_STEP_COMMANDS[exc.next_step.action](exc.next_step.arguments)})"


# --- settings and store ------------------------------------------------------------


def settings() -> Settings:
    """Settings of this process, loaded once per command invocation."""
    ctx = click.get_current_context().find_root()
    if "stash.settings" not in ctx.meta:
        from stash_pipeline.config import load_settings

        ctx.meta["stash.settings"] = load_settings()
    return ctx.meta["stash.settings"]


def store(*, check_schema: bool = True) -> Store:
    """The store for this invocation: opened on first use, closed when the command ends.

    Opening starts the embedded server when STASH_DATABASE_URL is unset. Unless told
    otherwise, it also checks that the schema is at head, so an unmigrated database
    gives one clear instruction instead of a "relation does not exist" error.
    """
    ctx = click.get_current_context().find_root()
    if "stash.store" not in ctx.meta:
        from stash_pipeline.db.dsn import database_dsn
        from stash_pipeline.store import Store

        current = settings()
        start_database()
        probe_database(database_dsn(current))
        opened = Store.open(current, pool_max=min(4, current.db_pool_max))
        ctx.call_on_close(opened.close)
        if check_schema:
            ensure_schema_current(opened)
        ctx.meta["stash.store"] = opened
    return ctx.meta["stash.store"]


def start_database() -> None:
    """Start the embedded server when it is the database and is down (a CLI entry point may;
    the library never does), saying so on stderr."""
    from stash_pipeline.db.dsn import start_embedded_if_needed

    current = settings()
    if start_embedded_if_needed(current):
        click.echo(
            f"started the embedded PostgreSQL on 127.0.0.1:{current.db_port} "
            "(it keeps running; `stash db stop` stops it)",
            err=True,
        )


def probe_database(dsn: str, timeout: int = 5) -> None:
    """One direct connection first, so an unreachable server fails in seconds with the
    driver's own reason (refused, bad password, no such database) instead of the pool
    retrying quietly until its timeout."""
    import logging

    import psycopg

    from stash_pipeline.db.gateway import translate_errors

    # the pool logs every failed attempt on stderr; the CLI reports one clear line instead
    logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)
    with translate_errors(), psycopg.connect(dsn, connect_timeout=timeout):
        pass


def head_revision() -> str:
    """Newest migration id, read from the version files (cheaper than importing Alembic)."""
    import stash_pipeline.db

    versions = Path(stash_pipeline.db.__file__).parent / "migrations" / "versions"
    revisions: dict[str, str | None] = {}
    for path in versions.glob("*.py"):
        text = path.read_text(encoding="utf-8")
        rev = re.search(r'^revision\s*=\s*["\']([^"\']+)["\']', text, re.M)
        down = re.search(r'^down_revision\s*=\s*(?:["\']([^"\']+)["\']|None)', text, re.M)
        if rev:
            revisions[rev.group(1)] = down.group(1) if down else None
    parents = {d for d in revisions.values() if d}
    heads = [r for r in revisions if r not in parents]
    if len(heads) == 1:
        return heads[0]
    from stash_pipeline.db.migrate import head_revision as alembic_head

    return alembic_head()


def current_revision(opened: Store) -> str | None:
    with opened.db.transaction() as tx:
        if not tx.scalar("cli_schema_table"):
            return None
        return tx.scalar("cli_schema_revision")


def ensure_schema_current(opened: Store) -> None:
    from stash_pipeline.errors import ConfigurationError

    current = current_revision(opened)
    head = head_revision()
    if current != head:
        state = "has no schema yet" if current is None else f"is at revision {current}, the code expects {head}"
        raise ConfigurationError(f"the database {state}; run `stash migrate` first")


# --- option parsers ---------------------------------------------------------------


def parse_json_object(value: str | None, field: str = "metadata") -> dict[str, Any] | None:
    if value is None:
        return None
    from stash_pipeline.errors import InvalidInput

    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{field} is not valid JSON: {exc.msg} at position {exc.pos}") from None
    if not isinstance(parsed, dict):
        raise InvalidInput(f"{field} must be a JSON object, e.g. '{{\"source\": \"chat\"}}'")
    return parsed


def read_content(value: str) -> str:
    """``-`` reads the content from stdin (for long or multi-line text)."""
    if value == "-":
        return click.get_text_stream("stdin").read()
    return value


def confirm(question: str, yes: bool) -> bool:
    """Ask unless ``--yes``; a refusal prints "cancelled" and the caller stops (exit 1)."""
    if yes:
        return True
    if click.confirm(question, default=False, err=True):
        return True
    click.echo("cancelled; nothing was changed", err=True)
    click.get_current_context().exit(OTHER_ERROR_CODE)
    return False


# --- shared options ---------------------------------------------------------------

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON records instead of a table.")
yes_option = click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")


class RequiredOption(click.Option):
    """An option a command cannot do without. Left out, it is said in one line with an
    example where one is given ("--namespace is required (e.g. -n /projects/x)"), not as
    the type error of a value it never had.

    No default is handed to click: click 8.2 and later take an explicit ``default=None`` as
    a value and would let a required option through empty.
    """

    def __init__(self, *args: Any, example: str | None = None, **kwargs: Any) -> None:
        kwargs.pop("default", None)
        super().__init__(*args, required=True, **kwargs)
        self.example = example

    def process_value(self, ctx: click.Context, value: Any) -> Any:
        try:
            return super().process_value(ctx, value)
        except click.MissingParameter:
            example = f" (e.g. {self.example})" if self.example else ""
            raise click.UsageError(f"{self.opts[0]} is required{example}", ctx) from None


#: the example a left-out ``--namespace`` is told with
NAMESPACE_EXAMPLE = "-n /projects/x"


def namespace_option(*, required: bool = True, default: str | None = None) -> Any:
    """``-n /projects/x``: the exact namespace a write goes to."""
    help_text = "Namespace path, e.g. /projects/x." + (f"  [default: {default}]" if default else "")
    if required and default is None:
        return click.option("--namespace", "-n", cls=RequiredOption, example=NAMESPACE_EXAMPLE, help=help_text)
    return click.option("--namespace", "-n", default=default, help=help_text)


def namespaces_option(*, default: str | None = "/") -> Any:
    """``-n /a,/b``: trees a read covers (descendants included; '/' = everything)."""
    return click.option(
        "--namespace", "-n", "namespaces", default=default, show_default=default is not None,
        help="Namespace path(s) to read, comma-separated; descendants are included.",
    )


def limit_option(default: int = 100) -> Any:
    return click.option("--limit", type=int, default=default, show_default=True, help="Maximum rows.")


offset_option = click.option("--offset", type=int, default=0, show_default=True, help="Rows to skip.")
