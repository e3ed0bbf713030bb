"""The word indexes without a pending list (see the .sql).

Revision ID: 0026
Revises: 0025
"""

from __future__ import annotations

from pathlib import Path

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(Path(__file__).with_suffix(".sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    raise NotImplementedError("Stash does not downgrade; restore from a backup (stash export) instead")
