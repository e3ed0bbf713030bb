"""A copy of ``stash_pipeline`` to edit, and a fresh interpreter that runs a probe on it.

The "adding a …" tests copy the package, make the few edits a new stage or knob takes, and
ask the copy (not the checkout) what follows from them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def copy_package(into: Path) -> Path:
    """``stash_pipeline`` copied under ``into`` (without bytecode); returns the copy."""
    copy = into / "stash_pipeline"
    shutil.copytree(ROOT / "stash_pipeline", copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def run_probe(into: Path, probe: str, database_url: str) -> dict[str, Any]:
    """Run ``probe`` in a fresh interpreter importing the copy under ``into``; its last line
    of output, parsed as JSON. ``PROBE_DSN`` names the test database."""
    env = {**os.environ, "PYTHONPATH": str(into), "PROBE_DSN": database_url, "STASH_HOME": str(into / "home")}
    done = subprocess.run([sys.executable, "-c", probe], env=env, cwd=into, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["module"].startswith(str(into))  # the copy ran, not the checkout
    return out
