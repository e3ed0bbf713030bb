"""Half-precision HNSW indexes for the nearest-vector reads (see the .sql).

Revision ID: 0019
Revises: 0018

The key's dimension is the vector column's own (its type modifier), not the configured
one: a store re-embedded to another dimension (stash reembed) has columns of that size.
"""

from __future__ import annotations

from pathlib import Path

from alembic import op
from sqlalchemy import text

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

_DIM = text("SELECT atttypmod FROM pg_attribute WHERE attrelid = 'episodes'::regclass AND attname = 'embedding'")


def upgrade() -> None:
    vector_dim = int(op.get_bind().execute(_DIM).scalar_one())
    sql = Path(__file__).with_suffix(".sql").read_text(encoding="utf-8")
    op.execute(sql.replace("{vector_dim}", str(vector_dim)))


def downgrade() -> None:
    raise NotImplementedError("Stash does not downgrade; restore from a backup (stash export) instead")
