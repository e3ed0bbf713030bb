"""One definition of what a read sees of facts, episodes and relationships as of / known at (see 0012_visibility.sql).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from pathlib import Path

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(Path(__file__).with_suffix(".sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    raise NotImplementedError("Stash does not downgrade; restore from a backup (stash export) instead")
