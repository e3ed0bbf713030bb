"""A table export's progress: each table's total (one count query per table, the table
named from the catalog) is the number of rows then written for it, namespaces included,
and a sibling tree outside the exported one is not counted."""

from __future__ import annotations

from stash_pipeline.interchange import export
from stash_pipeline.memory import facts, namespaces


def test_export_progress_totals_are_the_rows_written(store, tmp_path):
    for slug in ("/p", "/p/kid", "/other"):
        namespaces.create(store, slug)
    facts.assert_fact(store, "/p", "Backups run nightly")
    facts.assert_fact(store, "/p/kid", "The kid tree has its own fact")
    facts.assert_fact(store, "/other", "Not part of the export")
    seen: dict[str, tuple[int, int]] = {}
    manifest = export.export_tables(store, "/p", tmp_path / "out",
                                    progress=lambda table, done, total: seen.__setitem__(table, (done, total)))
    for name, entry in manifest["tables"].items():
        assert seen[name] == (entry["rows"], entry["rows"]), name
    assert manifest["tables"]["namespaces"]["rows"] == 2 and manifest["tables"]["facts"]["rows"] == 2
