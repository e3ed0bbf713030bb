"""The table catalog against a migrated schema: every column of every exported table is
classified, every time column is checked as one, and every table with a namespace is
either exported or listed as deliberately not exported."""

from __future__ import annotations

from stash_pipeline.db import catalog
from stash_pipeline.memory import lineage
from tests.integration.test_interchange import _sql


def _schema(store) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for r in _sql(store, "SELECT table_name, column_name, data_type FROM information_schema.columns "
                  "WHERE table_schema = 'public'"):
        out.setdefault(r["table_name"], {})[r["column_name"]] = r["data_type"]
    return out


def test_every_column_of_the_schema_is_classified(store):
    schema = _schema(store)
    for table in catalog.TABLES:
        columns = schema[table.name]
        assert set(columns) - table.columns == set(), f"{table.name}: columns the catalog does not classify"
        assert table.columns - set(columns) == set(), f"{table.name}: catalog columns the schema lacks"
        derived = catalog.DERIVED.get(table.name, set())  # computed by the database, never read from a file
        times = {c for c, t in columns.items() if t.startswith("timestamp")} - derived
        assert times == {c for c in columns if table.kinds.get(c) == "time"}, table.name
        for column, ref in table.refs.items():
            assert columns[column] == "bigint" and ref.scope in catalog.SCOPES, (table.name, column)


def test_every_namespaced_table_is_exported_or_excluded_on_purpose(store):
    namespaced = {t for t, cols in _schema(store).items() if "namespace_id" in cols}
    assert namespaced - set(catalog.BY_NAME) == set(catalog.NOT_EXPORTED)


def test_lineage_kinds_come_from_the_catalog():
    assert lineage.KINDS is catalog.LINEAGE_KINDS
    assert {"episode", "fact", "entity", "goal_note"} <= lineage.KINDS
    assert lineage.WITHDRAWABLE == ("fact", "relationship", "causal_link", "pattern")
