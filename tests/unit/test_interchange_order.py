"""The order an export writes each table in comes from the catalog (one ``interchange_rows``
query takes it as identifiers): it must name the table's own columns, and a table
without an ``id`` must name one, since the default order is by ``id``."""

from __future__ import annotations

from stash_pipeline.db import catalog

#: tables with a query of their own (sorted by namespace path), not the catalog's order
OWN_QUERY = ("contexts",)


def test_every_exported_table_is_sorted_by_its_own_columns():
    for table in catalog.TABLES:
        if table.name in OWN_QUERY:
            continue
        assert table.order.split(), table.name
        assert set(table.order.split()) <= table.columns, table.name
        if not table.has_id:
            assert "id" not in table.order.split(), f"{table.name} has no id to sort by"
