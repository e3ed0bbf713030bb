"""The PostgreSQL servers Stash supports, checked before it migrates or serves.

    PostgreSQL   15 to 18    tested on 15, 17 (a server) and 18 (the embedded one); a
                             newer major is used with a warning, an older one refused
    pgvector     >= 0.8.0    half-precision HNSW indexes (0.7) and iterative index
                             scans (0.8, ``hnsw.iterative_scan``), which recall uses

``check`` raises ``UnsupportedServer`` naming what to install; a database whose
extension is older than the server's offers is told to ``ALTER EXTENSION vector UPDATE``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import psycopg
from psycopg.rows import dict_row

from stash_pipeline import errors
from stash_pipeline.db.gateway import translate_errors
from stash_pipeline.db.sql import query

log = logging.getLogger(__name__)

SUPPORTED_MAJORS = (15, 16, 17, 18)
MIN_PGVECTOR = (0, 8, 0)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


@dataclass(frozen=True)
class ServerVersions:
    """What a server runs: PostgreSQL's version and pgvector's (installed, installable)."""

    version_num: int
    version: str
    vector_installed: str | None
    vector_available: str | None

    @property
    def major(self) -> int:
        return self.version_num // 10_000

    def problems(self) -> list[str]:
        """Why Stash cannot run on this server (empty: it can)."""
        found = []
        lowest, highest = SUPPORTED_MAJORS[0], SUPPORTED_MAJORS[-1]
        if self.major < lowest:
            found.append(f"PostgreSQL {self.version} is not supported; Stash needs PostgreSQL {lowest}–{highest}")
        need = _dotted(MIN_PGVECTOR)
        if self.vector_available is None and self.vector_installed is None:
            found.append(f"the server has no pgvector extension; install pgvector >= {need} "
                         "(the pgvector/pgvector images carry it)")
        elif self.vector_installed is not None and _version(self.vector_installed) < MIN_PGVECTOR:
            if self.vector_available and _version(self.vector_available) >= MIN_PGVECTOR:
                found.append(f"this database has pgvector {self.vector_installed}; Stash needs >= {need}, "
                             f"which the server has: run ALTER EXTENSION vector UPDATE as the database owner")
            else:
                found.append(f"pgvector {self.vector_installed} is too old; Stash needs pgvector >= {need}")
        elif self.vector_installed is None and _version(self.vector_available or "") < MIN_PGVECTOR:
            found.append(f"the server offers pgvector {self.vector_available}; Stash needs pgvector >= {need}")
        return found

    def warnings(self) -> list[str]:
        """What may work but was never tested."""
        highest = SUPPORTED_MAJORS[-1]
        if self.major > highest:
            return [f"PostgreSQL {self.version} is newer than any Stash was tested on ({highest})"]
        return []


def read(conn: psycopg.Connection) -> ServerVersions:
    """The versions of the server ``conn`` is connected to."""
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(query("server_versions"))
        row = cur.fetchone()
    assert row is not None
    return ServerVersions(**row)


def check(dsn: str) -> ServerVersions:
    """The server's versions; ``UnsupportedServer`` if Stash cannot run there."""
    with translate_errors(), psycopg.connect(dsn, connect_timeout=10, autocommit=True) as conn:
        versions = read(conn)
    if problems := versions.problems():
        raise errors.UnsupportedServer("; ".join(problems))
    for warning in versions.warnings():
        log.warning("%s", warning)
    return versions
