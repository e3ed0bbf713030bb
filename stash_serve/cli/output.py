"""How the CLI prints: JSON (``--json``: each record's ``to_json()``) or plain tables and
``key: value`` lines for people. Long text is cut in tables, never in JSON."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import click

CELL_WIDTH = 60
_ISO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:\d\d)?$")


def to_plain(value: Any) -> Any:
    """Records, lists and dicts of records → JSON-ready values."""
    if hasattr(value, "to_json"):
        return value.to_json()
    if hasattr(value, "as_dict"):
        return to_plain(value.as_dict())
    if isinstance(value, Mapping):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [to_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def emit_json(value: Any) -> None:
    click.echo(json.dumps(to_plain(value), indent=2, ensure_ascii=False, default=str))


def _cell(value: Any, width: int = CELL_WIDTH) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        text = value.strftime("%Y-%m-%d %H:%M")
    elif isinstance(value, float):
        text = f"{value:.3f}"
    elif isinstance(value, list | tuple):
        text = ",".join(str(v) for v in value)
    elif isinstance(value, dict):
        text = json.dumps(value, ensure_ascii=False, default=str)
    elif isinstance(value, str) and _ISO_TIME.match(value):
        text = value[:16].replace("T", " ")  # records serialised upstream: same look as datetimes
    else:
        text = str(value)
    text = " ".join(text.split())  # one line per row
    return text if len(text) <= width else text[: width - 1] + "…"


def table(rows: Iterable[Any], columns: Sequence[str], *, empty: str = "(none)") -> None:
    """Print rows (records or dicts) as an aligned table of the given columns."""
    plain = []
    for row in rows:
        data = row if isinstance(row, Mapping) else {c: getattr(row, c, None) for c in columns}
        plain.append([_cell(data.get(c)) for c in columns])
    if not plain:
        click.echo(empty)
        return
    widths = [max(len(c), *(len(r[i]) for r in plain)) for i, c in enumerate(columns)]
    click.echo("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for r in plain:
        click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip())


def fields(record: Any, *, skip: Sequence[str] = ()) -> None:
    """Print one record as ``key: value`` lines (nested lists summarised)."""
    data = to_plain(record)
    if not isinstance(data, Mapping):
        click.echo(str(data))
        return
    width = max((len(k) for k in data), default=0)
    for key, value in data.items():
        if key in skip:
            continue
        if isinstance(value, list) and value and isinstance(value[0], Mapping):
            click.echo(f"{key.ljust(width)}: ({len(value)})")
            for item in value:
                click.echo("  - " + _cell(" ".join(f"{k}={v}" for k, v in item.items() if v is not None), 110))
            continue
        shown = "" if value is None else (json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value)
        click.echo(f"{key.ljust(width)}: {shown}")


def show(value: Any, as_json: bool, columns: Sequence[str] | None = None) -> None:
    """One entry point: JSON, a table (for lists, given columns) or key/value lines."""
    if as_json:
        emit_json(value)
    elif columns is not None and isinstance(value, list | tuple):
        table(value, columns)
    else:
        fields(value)
