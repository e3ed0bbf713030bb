"""Causal links and a fact's replacement in the one visibility definition; an entity's links by effect (see the .sql).

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

from pathlib import Path

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(Path(__file__).with_suffix(".sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    raise NotImplementedError("Stash does not downgrade; restore from a backup (stash export) instead")
