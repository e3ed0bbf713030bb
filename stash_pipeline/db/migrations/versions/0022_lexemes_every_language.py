"""Recall's lexemes in every language: stash_lexemes() for the search columns and the queries (see the .sql).

Revision ID: 0022
Revises: 0021
"""

from __future__ import annotations

from pathlib import Path

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(Path(__file__).with_suffix(".sql").read_text(encoding="utf-8"))


def downgrade() -> None:
    raise NotImplementedError("Stash does not downgrade; restore from a backup (stash export) instead")
