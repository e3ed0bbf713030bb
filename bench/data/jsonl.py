"""The labelled sets' file format: one JSON object a line, keys sorted, so a rebuild is byte-identical."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_files(files: dict[str, list[dict[str, Any]]], directory: Path) -> dict[str, int]:
    """Write each {file name: rows} as JSONL in ``directory``; returns the line count per file."""
    for name, rows in files.items():
        with (directory / name).open("w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
    return {name: len(rows) for name, rows in files.items()}


def read_files(names: dict[str, str], directory: Path) -> dict[str, list[dict[str, Any]]]:
    """Read {key: file name} from ``directory`` into {key: rows}."""
    out: dict[str, list[dict[str, Any]]] = {}
    for key, name in names.items():
        with (directory / name).open(encoding="utf-8") as handle:
            out[key] = [json.loads(line) for line in handle if line.strip()]
    return out
