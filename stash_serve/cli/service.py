"""``stash serve mcp``, ``stash serve dagster-ui``, ``stash tools``, ``stash up``, ``stash dagster``
and ``stash token create|list|revoke``: serving Stash, the toolsets it offers, Dagster's own CLI
on Stash's instance, and the bearer tokens that guard its HTTP transport and the Dagster UI."""

from __future__ import annotations

import click

from stash_serve.cli import base
from stash_serve.cli.output import emit_json, show

TOKEN_COLUMNS = ("id", "name", "prefix", "namespaces", "rights", "created_at", "last_used_at", "revoked_at")


@click.group("serve")
def serve_group() -> None:
    """Serve Stash to agents.

    \b
    Example:
      stash serve mcp --transport http --port 8080
    """


@serve_group.command("mcp")
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True,
              help="stdio for a local client; http for streamable HTTP (+ /healthz, /readyz, /metrics).")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address.")
@click.option("--port", type=int, default=8080, show_default=True, help="HTTP port.")
@click.option("--no-auth", is_flag=True, help="HTTP without bearer tokens (loopback hosts only).")
@click.option("--toolsets", metavar="SPEC", default=None,
              help="Tools offered: default, all, or toolset names, comma-separated (default,graph); "
                   "default: STASH_TOOLSETS, else default. `stash tools` lists them.")
@click.option("--workers", type=click.IntRange(min=1), default=None, metavar="N",
              help="HTTP worker processes sharing the port; default: STASH_HTTP_WORKERS, else one per "
                   "CPU (at most 4) within the database's connection budget.")
def serve_mcp(transport: str, host: str, port: int, no_auth: bool, toolsets: str | None, workers: int | None) -> None:
    """Run the MCP server: the everyday tools, or the toolsets asked for.

    \b
    Example:
      stash serve mcp                      # stdio, e.g. from an MCP client config
      stash serve mcp --transport http --host 0.0.0.0 --port 8080 --toolsets all
      stash serve mcp --transport http --workers 4
    """
    from stash_serve.mcp.toolsets import select
    from stash_serve.serve import run

    spec = base.settings().toolsets if toolsets is None else toolsets
    select(spec)  # a bad spec is the caller's mistake, said before anything starts
    base.start_database()  # an entry point: the library (Store.open) never starts the server
    run(base.settings(), transport=transport, host=host, port=port, no_auth=no_auth, toolsets=spec,
        workers=workers)


@serve_group.command("dagster-ui")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address.")
@click.option("--port", type=int, default=3000, show_default=True, help="HTTP port.")
@click.option("--workspace", "-w", metavar="FILE", default=None,
              help="Dagster workspace file (default: the packaged one, loading stash_pipeline.defs).")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="Another Host name to answer to, e.g. behind a reverse proxy (repeatable); "
                   "loopback names always are.")
def serve_dagster_ui(host: str, port: int, workspace: str | None, allow_hosts: tuple[str, ...]) -> None:
    """Serve the Dagster UI (the instance in DAGSTER_HOME) behind Stash's admin-token check.

    Every request needs a token with the admin right on / (`Authorization: Bearer`, or the
    session cookie set by the login page at /_stash/login) and a Host and Origin of its own;
    `stash up` runs this, not the bare dagster-webserver. Run the Dagster daemon beside it.

    \b
    Example:
      stash serve dagster-ui --port 3000
      stash serve dagster-ui --host 0.0.0.0 --allow-host dagster.example.com -w workspace.yaml
    """
    from pathlib import Path

    from stash_serve.dagster_ui import run_ui
    from stash_serve.up import DAGSTER_CONFIG

    base.start_database()  # an entry point: the library (Store.open) never starts the server
    run_ui(base.settings(), host=host, port=port, allowed_hosts=allow_hosts,
           workspace=Path(workspace) if workspace else DAGSTER_CONFIG / "workspace.yaml")


@click.command("tools")
@click.option("--toolsets", metavar="SPEC", default=None,
              help="Only the tools this spec offers (default: every toolset, each with its tools).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def tools_command(toolsets: str | None, as_json: bool) -> None:
    """List the MCP toolsets and their tools (`stash serve mcp --toolsets`, STASH_TOOLSETS).

    \b
    Example:
      stash tools
      stash tools --toolsets default,graph
    """
    from stash_serve.mcp import toolsets as sets

    if toolsets is not None:
        chosen = [op.name for op in sets.select(toolsets)]
        if as_json:
            emit_json({"toolsets": toolsets, "tools": chosen})
        else:
            click.echo(f"{toolsets}: {len(chosen)} tools\n  " + "\n  ".join(chosen))
        return
    found = {name: [op.name for op in ops] for name, ops in sets.toolsets().items()}
    if as_json:
        emit_json({"toolsets": found, "default": sets.DEFAULT, "all": [op.name for op in sets.every_operation()]})
        return
    for name, tools in found.items():
        click.echo(f"{name} ({len(tools)}): {', '.join(tools)}")
    click.echo(f"all ({len(sets.every_operation())}): every tool above")


@click.command("up")
@click.option("--mcp-host", default="127.0.0.1", show_default=True, help="MCP HTTP bind address.")
@click.option("--mcp-port", type=int, default=8080, show_default=True, help="MCP HTTP port.")
@click.option("--dagster-port", type=int, default=3000, show_default=True, help="Dagster UI port.")
@click.option("--no-dagster", is_flag=True, help="Only the database and the MCP server.")
def up_command(mcp_host: str, mcp_port: int, dagster_port: int, no_dagster: bool) -> None:
    """Start everything locally: database, migrations, MCP over HTTP, Dagster UI and daemon.

    Ctrl-C stops them all.

    \b
    Example:
      stash up
    """
    from stash_serve.up import run_up

    code = run_up(
        base.settings(), mcp_host=mcp_host, mcp_port=mcp_port, dagster_port=dagster_port,
        with_dagster=not no_dagster, echo=click.echo,
    )
    click.get_current_context().exit(code)


@click.command(
    "dagster",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("--env", "print_env", is_flag=True,
              help="Print that environment as `export` lines instead, for `eval \"$(stash dagster --env)\"`.")
@click.argument("dagster_args", nargs=-1, type=click.UNPROCESSED)
def dagster_command(print_env: bool, dagster_args: tuple[str, ...]) -> None:
    """Run Dagster's CLI on Stash's instance, with the environment `stash up` gives Dagster.

    DAGSTER_HOME (under STASH_HOME, holding Stash's dagster.yaml), the STASH_DAGSTER_PG_*
    settings of its storage and the database come from Stash's settings; the arguments go
    to `dagster` unchanged (after `--` when the first one is an option). Starts the
    embedded database if it is down. `--env` prints the variables instead, for a shell
    that runs dagster-daemon, dagster dev or `stash serve dagster-ui` by hand.

    \b
    Example:
      stash dagster asset list -m stash_pipeline.defs.definitions
      stash dagster asset materialize -m stash_pipeline.defs.definitions --select profiles --partition /projects/x
      eval "$(stash dagster --env)"
    """
    from stash_serve.up import dagster_cli

    base.start_database()  # an entry point: the library (Store.open) never starts the server
    dagster_cli(base.settings(), dagster_args, print_env=print_env)


@click.group("token")
def token_group() -> None:
    """Bearer tokens for the MCP HTTP transport, scoped to namespace trees and rights.

    \b
    Example:
      stash token create --namespace /projects/x --rights read,write --name ci-agent
    """


@token_group.command("create")
@click.option("--namespace", "-n", "namespaces", multiple=True, required=True,
              help="Namespace tree the token may use (repeat for several).")
@click.option("--rights", default="read,write", show_default=True, help="Comma-separated: read, write, admin.")
@click.option("--name", default="", help="A label to recognise the token by.")
@base.json_option
def token_create(namespaces: tuple[str, ...], rights: str, name: str, as_json: bool) -> None:
    """Create a token; its secret is printed once and never again.

    \b
    Example:
      stash token create --namespace /projects/x --namespace /self --rights read --name reviewer
    """
    from stash_pipeline import auth

    granted = [r.strip() for r in rights.split(",") if r.strip()]
    result = auth.create_token(base.store(), list(namespaces), granted, name)
    if as_json:
        emit_json(result)
        return
    click.echo(result["token"])
    click.echo(
        f"token {result['id']} ({', '.join(result['rights'])} on {', '.join(result['namespaces'])}) — "
        "store the secret now; it is not shown again",
        err=True,
    )


@token_group.command("list")
@base.json_option
def token_list(as_json: bool) -> None:
    """List tokens (never their secrets).

    \b
    Example:
      stash token list
    """
    from stash_pipeline import auth

    show(auth.list_tokens(base.store()), as_json, TOKEN_COLUMNS)


@token_group.command("revoke")
@click.argument("token_id", type=int)
def token_revoke(token_id: int) -> None:
    """Revoke a token; requests with it are refused from now on.

    \b
    Example:
      stash token revoke 3
    """
    from stash_pipeline import auth
    from stash_pipeline.errors import RecordNotFound

    if not auth.revoke_token(base.store(), token_id):
        raise RecordNotFound(f"no active token with id {token_id}")
    click.echo(f"revoked token {token_id}")


COMMANDS = (serve_group, tools_command, up_command, dagster_command, token_group)
