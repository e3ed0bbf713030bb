"""docs/cli.md's "Arguments and options:" lines, written from the command tree.

Each command's section in docs/cli.md names its arguments and options in one line; this
module writes that line from the command itself, so a parameter added to an operation's
arguments model reaches the reference with no edit of its own:
``python -m stash_serve.cli.reference`` rewrites the lines in place, and
``tests/unit/test_cli_help.py`` fails while the file is not current.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
LINE = "Arguments and options: "
_HEADING = re.compile(r"^#{2,4} `stash ([^`]*)`\s*$")


def options_line(command: click.Command) -> str | None:
    """"Arguments and options: `FACT_ID`, `--as-of`, `--namespace/-n`…", or None without any."""
    names = []
    for param in command.params:
        if isinstance(param, click.Argument):
            names.append((param.metavar or param.name or "").upper())
        elif isinstance(param, click.Option) and "--help" not in param.opts:
            longs = [o for o in param.opts if o.startswith("--")]
            shorts = [o for o in param.opts if not o.startswith("--")]
            names.append("/".join([*longs, *shorts[:1]]))
    return LINE + ", ".join(f"`{n}`" for n in names) + "." if names else None


def command_at(root: click.Group, words: list[str]) -> click.Command | None:
    command: click.Command | None = root
    for word in words:
        command = command.commands.get(word) if isinstance(command, click.Group) else None
    return command


def synced(text: str, root: click.Group) -> str:
    """``text`` with the options line of every command section written from ``root``."""
    out: list[str] = []
    current: click.Command | None = None
    for line in text.splitlines(keepends=True):
        heading = _HEADING.match(line)
        if heading:
            current = command_at(root, heading.group(1).split())
        elif line.startswith(LINE) and current is not None and not isinstance(current, click.Group):
            fresh = options_line(current)
            if fresh is not None:
                line = fresh + "\n"
        out.append(line)
    return "".join(out)


def main() -> None:
    """Rewrite docs/cli.md's options lines (``--check``: only say whether they are current)."""
    from stash_serve.cli import cli

    text = DOCS.read_text(encoding="utf-8")
    fresh = synced(text, cli)
    if "--check" in sys.argv[1:]:
        sys.exit(0 if fresh == text else 1)
    DOCS.write_text(fresh, encoding="utf-8")


if __name__ == "__main__":
    main()
