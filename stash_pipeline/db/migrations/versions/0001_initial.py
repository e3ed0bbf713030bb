"""Initial schema: every table Stash keeps (see 0001_initial.sql).

Revision ID: 0001
Revises:
"""

from __future__ import annotations

from pathlib import Path

from alembic import context, op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    vector_dim = int(context.config.attributes["vector_dim"])
    sql = (Path(__file__).with_suffix(".sql")).read_text(encoding="utf-8")
    op.execute(sql.replace("{vector_dim}", str(vector_dim)))


def downgrade() -> None:
    raise NotImplementedError("Stash does not downgrade; restore from a backup (stash export) instead")
