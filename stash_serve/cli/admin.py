"""``stash version``, ``config``, ``doctor``, ``stats``, ``reembed`` and ``embed-pending``.

``version`` and ``config`` never open the database; ``doctor`` opens it only to check it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import click

from stash_pipeline.operations import admin as admin_ops
from stash_serve.cli import base
from stash_serve.cli.derive import command
from stash_serve.cli.output import emit_json, fields


@click.command("version")
def version_command() -> None:
    """Print the Stash version (no database needed).

    \b
    Example:
      stash version
    """
    from stash_pipeline import __version__

    click.echo(f"stash {__version__}")


@click.command("config")
@base.json_option
def config_command(as_json: bool) -> None:
    """Show the effective settings (environment and .env), secrets masked.

    Never opens the database.

    \b
    Example:
      STASH_EMBEDDER=hash stash config --json
    """
    view = base.settings().public_view()
    if as_json:
        emit_json(view)
        return
    width = max(len(k) for k in view)
    for key, value in view.items():
        click.echo(f"{key.ljust(width)}  {'' if value is None else value}")


# --- doctor --------------------------------------------------------------------------


#: how each status of a check is marked: an optional part left off is neither a pass nor a failure
MARKS = {"ok": "✓", "not configured": "○", "failed": "✗"}


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    #: ``ok``, ``failed``, or ``not configured`` (an optional part that is off: ``ok`` stays
    #: true, as it is no failure); derived from ``ok`` unless given
    status: str = ""

    def __post_init__(self) -> None:
        self.status = self.status or ("ok" if self.ok else "failed")


class CheckFailed(Exception):
    """A check's expected failure: its message says what is wrong and what to fix."""


def _run_check(name: str, probe: Callable[[], str]) -> Check:
    from stash_pipeline.errors import StashError

    try:
        return Check(name, True, probe())
    except StashError as exc:
        return Check(name, False, exc.message)
    except CheckFailed as exc:
        return Check(name, False, str(exc))
    except Exception as exc:  # a doctor reports every failure instead of stopping at the first
        return Check(name, False, f"{type(exc).__name__}: {exc}")


def doctor_checks() -> list[Check]:
    """Settings, database, connection budget, migrations, embedder + lock, model endpoint — in that order."""
    from stash_pipeline.config import load_settings

    checks: list[Check] = []
    try:
        settings = load_settings()
    except Exception as exc:
        message = getattr(exc, "message", str(exc))
        return [Check("settings", False, f"{message} — fix the STASH_* variables or .env")]
    checks.append(Check("settings", True, f"valid (embedder {settings.embedder}, home {settings.home})"))

    from stash_pipeline.store import Store

    opened: dict[str, Store] = {}

    def database() -> str:
        if settings.embedded:
            from stash_pipeline.db.embedded import EmbeddedServer

            status = EmbeddedServer(settings).status()
            if not status.running:
                raise CheckFailed(
                    f"the embedded PostgreSQL is not running on port {status.port}; run `stash db start`"
                )
            where = f"embedded server on 127.0.0.1:{status.port}"
        else:
            where = "STASH_DATABASE_URL"
        from stash_pipeline.db.server import check

        candidate = Store.open(settings, pool_max=2, timeout=5.0)
        try:
            versions = check(candidate.db.dsn)  # a server Stash does not support fails here, saying why
            candidate.db.ping()
        except BaseException:
            candidate.close()  # the pool would keep retrying in the background otherwise
            raise
        opened["store"] = candidate
        vector = versions.vector_installed or f"{versions.vector_available} (not installed yet)"
        return f"reachable ({where}, PostgreSQL {versions.version}, pgvector {vector})"

    checks.append(_run_check("database", database))
    store = opened.get("store")
    if store is None:
        checks.append(Check("migrations", False, "skipped: the database is not reachable"))
        checks.append(Check("embedder", False, "skipped: the model lock lives in the database"))
    else:

        def migrations() -> str:
            current, head = base.current_revision(store), base.head_revision()
            if current != head:
                raise CheckFailed(f"schema at {current or '(empty)'}, code expects {head}; run `stash migrate`")
            return f"schema at head ({head})"

        def embedder() -> str:
            store.embedder.check_lock()
            vector = store.embedder.inner.embed(["stash doctor"])[0]
            if len(vector) != store.embedder.dim:
                raise CheckFailed(f"embedder returned {len(vector)} dims, expected {store.embedder.dim}")
            return f"{store.embedder.name} loads ({store.embedder.dim} dims), model lock OK"

        def connections() -> str:
            from stash_pipeline.db.budget import read_budget
            from stash_pipeline.errors import ConfigurationError
            from stash_serve.workers import choose_workers

            budget = read_budget(store.db, settings)
            # as many HTTP workers as `stash serve mcp --transport http` would start here
            budget = budget.with_workers(choose_workers(settings.http_workers, budget)[0])
            if not budget.fits:
                raise ConfigurationError(budget.describe())
            return budget.describe()

        checks.append(_run_check("connections", connections))
        checks.append(_run_check("migrations", migrations))
        if checks[-1].ok:
            checks.append(_run_check("embedder", embedder))
        else:
            checks.append(Check("embedder", False, "skipped: migrate first (the model lock lives in the schema)"))

    if settings.openai_base_url:

        def endpoint() -> str:
            import openai

            client = openai.OpenAI(
                base_url=settings.openai_base_url,
                api_key=(settings.openai_api_key.get_secret_value() if settings.openai_api_key else "not-set"),
                timeout=5.0,
                max_retries=0,
            )
            try:
                names = [m.id for m in client.models.list()]
            except openai.APIStatusError as exc:
                if exc.status_code in (401, 403):
                    raise CheckFailed(
                        f"{settings.openai_base_url} refused the API key (HTTP {exc.status_code}); check STASH_OPENAI_API_KEY"
                    ) from None
                if exc.status_code in (404, 405, 501):
                    # reachable; some OpenAI-compatible servers simply do not list models
                    listing = f"it does not list models: HTTP {exc.status_code}"
                    return f"{settings.openai_base_url} reachable ({listing})" + reasoner_call()
                raise CheckFailed(f"{settings.openai_base_url} answered HTTP {exc.status_code} to GET /models") from None
            except openai.APIError as exc:
                raise CheckFailed(
                    f"{settings.openai_base_url} is not reachable: {exc} — fix: start the model server, "
                    "or correct STASH_OPENAI_BASE_URL (host, port and the /v1 suffix)"
                ) from None
            finally:
                client.close()
            wanted = [m for m in (settings.reasoner_model, settings.embedding_model) if m]
            missing = [m for m in wanted if names and m not in names]
            note = f"; not listed by the endpoint: {', '.join(missing)}" if missing else ""
            return f"{settings.openai_base_url} reachable ({len(names)} models){note}" + reasoner_call()

        def reasoner_call() -> str:
            """One tiny structured call: mode, latency, or what to fix."""
            if not settings.reasoner_configured:
                return "; no STASH_REASONER_MODEL: the model stages stay idle"
            from stash_pipeline.consolidation.probe import probe

            result = probe(settings, store.db if store is not None else None)
            if not result.ok:
                raise CheckFailed(f"{settings.openai_base_url} reachable, but the reasoner failed: {result.line()}")
            return f"; reasoner {result.line()}"

        checks.append(_run_check("model endpoint", endpoint))
    else:
        checks.append(
            Check("model endpoint", True, "not configured (optional: the model stages need one; set "
                  "STASH_REASONER_MODEL and STASH_OPENAI_BASE_URL)", status="not configured")
        )
    if store is not None:
        store.close()
    return checks


@click.command("doctor")
@base.json_option
def doctor_command(as_json: bool) -> None:
    """Check settings, database, connection budget, migrations, embedder and model endpoint; say what to fix.

    Each check is ✓ ok, ✗ failed, or ○ not configured (an optional part, such as the
    model endpoint, that is off). Exits 1 when any check fails. With --json each check has
    a status (ok, failed, not configured); ok is false only for a failed one.

    \b
    Example:
      stash doctor
    """
    checks = doctor_checks()
    if as_json:
        emit_json([{"check": c.name, "status": c.status, "ok": c.ok, "detail": c.detail} for c in checks])
    else:
        for c in checks:
            click.echo(f"{MARKS[c.status]} {c.name}: {c.detail}")
    if not all(c.ok for c in checks):
        click.get_current_context().exit(1)


# --- stats / reembed -----------------------------------------------------------------


# `stash stats`: derived from stash_pipeline.operations.admin
stats_command = command(admin_ops.STATS)


@click.command("reembed")
@base.yes_option
@click.option("--batch-size", type=int, default=None, help="Rows embedded and committed at a time (default STASH_EMBEDDING_BATCH_SIZE).")
@base.json_option
def reembed_command(yes: bool, batch_size: int | None, as_json: bool) -> None:
    """Re-embed every episode, fact and entity name with the configured embedder (after a model switch).

    \b
    Example:
      STASH_EMBEDDER=minilm stash reembed --yes
    """
    from stash_pipeline.memory.reembed import reembed

    store = base.store()
    base.confirm(
        f"re-embed everything with {store.settings.embedding_model_name} "
        f"({store.settings.vector_dim} dims)? This can take a while", yes
    )

    def progress(done: int, total: int) -> None:
        click.echo(f"\r  {done}/{total}", nl=False, err=True)

    result = reembed(store, progress=progress, batch_size=batch_size).to_json()
    click.echo("", err=True)
    if as_json:
        emit_json(result)
    else:
        fields(result)


@click.command("embed-pending")
@click.option("--batch-size", type=int, default=None, help="Episodes per forward pass (default STASH_EMBEDDING_BATCH_SIZE).")
@click.option("--status", "status_only", is_flag=True, help="Only show how many episodes wait and for how long.")
@base.json_option
def embed_pending_command(batch_size: int | None, status_only: bool, as_json: bool) -> None:
    """Embed the episodes still waiting for their vector, then show what is left.

    With STASH_EMBED_ON_WRITE=async (or auto with a slow embedder) remember commits a
    new text before its vector exists; the running service embeds it within about a
    second. Use this when no service runs, or to clear a backlog at once. Safe next to
    running services: each waiting row is embedded by exactly one of them.

    \b
    Example:
      stash embed-pending
      stash embed-pending --status --json
    """
    from stash_pipeline.memory.pending import backlog, embed_pending

    if batch_size is not None and batch_size < 1:
        raise click.BadParameter("must be at least 1", param_hint="--batch-size")
    store = base.store()
    embedded = 0 if status_only else embed_pending(store, batch_size=batch_size)
    left = backlog(store)
    result = {"embedded": embedded, "still_pending": left.pending, "oldest_age_s": left.oldest_age_s}
    if as_json:
        emit_json(result)
    else:
        fields(result)


COMMANDS = (version_command, config_command, doctor_command, stats_command, reembed_command, embed_pending_command)
