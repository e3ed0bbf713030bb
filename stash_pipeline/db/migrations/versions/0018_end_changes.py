"""When each row's end last changed, so a known_at read skips the history of rows unchanged since (see the .sql).

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

from pathlib import Path

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(Path(__file__).with_suffix(".sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    raise NotImplementedError("Stash does not downgrade; restore from a backup (stash export) instead")
