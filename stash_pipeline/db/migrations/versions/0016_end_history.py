"""Every earlier end of a fact, relationship and causal link, so a known_at read is exact (see the .sql).

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

from pathlib import Path

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(Path(__file__).with_suffix(".sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    raise NotImplementedError("Stash does not downgrade; restore from a backup (stash export) instead")
