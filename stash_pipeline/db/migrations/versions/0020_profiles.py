"""Profile facts: the origin 'profile' and their withdrawal when a member retires (see the .sql).

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

from pathlib import Path

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(Path(__file__).with_suffix(".sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    raise NotImplementedError("Stash does not downgrade; restore from a backup (stash export) instead")
