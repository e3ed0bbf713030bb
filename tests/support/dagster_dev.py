"""Start `dagster dev` on the test PostgreSQL with the project's instance and workspace files.

Used by the tests that drive Dagster the way its UI does (tests/dagster): one place that
knows the environment a code location needs and how to start the process so it can be
stopped as a group.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict

from stash_serve.up import DAGSTER_CONFIG

ROOT = Path(__file__).resolve().parents[2]


def dagster_env(
    *, home: Path, pg_admin_dsn: str, dagster_db: str, database_url: str, stash_home: Path, model_url: str
) -> dict[str, str]:
    """The environment of a `dagster dev` whose instance is ``home`` and whose stages talk to ``model_url``."""
    admin = conninfo_to_dict(pg_admin_dsn)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STASH_", "DAGSTER_"))}
    env.update(
        {
            "DAGSTER_HOME": str(home),
            "STASH_DAGSTER_PG_HOST": str(admin.get("host", "127.0.0.1")),
            "STASH_DAGSTER_PG_PORT": str(admin.get("port", "5432")),
            "STASH_DAGSTER_PG_USER": str(admin.get("user", "postgres")),
            "STASH_DAGSTER_PG_PASSWORD": str(admin.get("password", "")),
            "STASH_DAGSTER_PG_DB": dagster_db,
            "STASH_DATABASE_URL": database_url,
            "STASH_HOME": str(stash_home),
            "STASH_EMBEDDER": "hash",
            "STASH_OPENAI_BASE_URL": model_url,
            "STASH_OPENAI_API_KEY": "test",
            "STASH_REASONER_MODEL": "scripted",
            "STASH_ENV_FILE": "/nonexistent/.env",
        }
    )
    return env


def start_dagster_dev(
    home: Path, env: dict[str, str], port: int, cwd: Path, log: Path, *, from_checkout: bool = False
) -> subprocess.Popen[bytes]:
    """`dagster dev` with the project's dagster.yaml in ``home``, output to ``log``.

    ``from_checkout``: as a user runs it in a checkout — in the repository root, with no
    DAGSTER_HOME and no ``-w``, so Dagster reads the root ``dagster.yaml`` and
    ``workspace.yaml`` itself (its temporary instance directory goes under the root and is
    removed when it stops).
    """
    dagster = str(Path(sys.executable).parent / "dagster")
    command = [dagster, "dev", "-h", "127.0.0.1", "-p", str(port)]
    if from_checkout:
        env = {k: v for k, v in env.items() if k != "DAGSTER_HOME"}
        cwd = ROOT
    else:
        home.mkdir(parents=True, exist_ok=True)
        shutil.copy(DAGSTER_CONFIG / "dagster.yaml", home / "dagster.yaml")
        command[2:2] = ["-w", str(DAGSTER_CONFIG / "workspace.yaml")]
    with open(log, "wb") as out:
        return subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, stopped as one
            # `dagster dev` maps SIGTERM to SIGINT's handler; make sure that is the default one
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
