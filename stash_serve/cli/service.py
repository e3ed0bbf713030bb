"""``stash serve mcp``, ``stash up`` and ``stash token create|list|revoke``: serving Stash
and the bearer tokens that guard its HTTP transport."""

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
def serve_mcp(transport: str, host: str, port: int, no_auth: bool) -> None:
    """Run the MCP server (every memory operation as a tool).

    \b
    Example:
      stash serve mcp                      # stdio, e.g. from an MCP client config
      stash serve mcp --transport http --host 0.0.0.0 --port 8080
    """
    from stash_serve.serve import run

    base.start_database()  # an entry point: the library (Store.open) never starts the server
    run(base.settings(), transport=transport, host=host, port=port, no_auth=no_auth)


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


COMMANDS = (serve_group, up_command, token_group)
