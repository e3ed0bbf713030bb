"""Adding a recall knob callers see is three edits: everything else follows.

The test copies the package and gives the copy's ``recall`` one new argument, ``only_kind``
(facts or episodes only), by editing exactly three files: the operation's argument model
(``operations/recall.py``), the request (``recall/request.py``) and the statement that
uses it (``recall/queries/recall.sql``). A fresh interpreter running the copy then shows it
everywhere a caller meets recall: the MCP tool's input schema, the ``stash recall`` flag,
and a recall against a real database that keeps only the kind asked for. A knob that
needed a fourth file (a parameter list, a second signature) would fail here.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.package_copy import ROOT, copy_package, run_probe

FIELD = '''    only_kind: Annotated[
        Literal["fact", "episode"] | None, Field(description="Only facts or only episodes.")
    ] = None
'''

EDITS = {
    # the argument model: one field (and the names it uses)
    "operations/recall.py": [
        ("from typing import Annotated, Any\n", "from typing import Annotated, Any, Literal\n"),
        ("    ] = False\n\n\ndef _recall(", "    ] = False\n" + FIELD + "\n\ndef _recall("),
    ],
    # the request: the field of the same name
    "recall/request.py": [
        ("    config: RecallConfig = DEFAULT\n", "    only_kind: str | None = None\n    config: RecallConfig = DEFAULT\n"),
    ],
    # the statement: the rule, reading the field by its name
    "recall/queries/recall.sql": [
        ("JOIN namespaces n ON n.id = COALESCE(f.namespace_id, e.namespace_id)\nORDER BY r.place",
         "JOIN namespaces n ON n.id = COALESCE(f.namespace_id, e.namespace_id)\n"
         "WHERE %(only_kind)s::text IS NULL OR r.kind = %(only_kind)s::text\nORDER BY r.place"),
    ],
}

PROBE = r'''
import json, os, warnings
warnings.simplefilter("ignore")
from click.testing import CliRunner
from stash_pipeline.config import load_settings
from stash_pipeline.memory import episodes, facts, namespaces
from stash_pipeline.operations.recall import RECALL
from stash_pipeline.store import Store
from stash_serve.cli import cli

store = Store.open(load_settings(database_url=os.environ["PROBE_DSN"], embedder="hash"))
namespaces.create(store, "/knob")
episodes.remember(store, "/knob", "The backup job runs every night at two")
facts.assert_fact(store, "/knob", "The backup job runs nightly")


def kinds(**arguments):
    args = RECALL.parse({"query": "when does the backup job run", "namespaces": ["/knob"], **arguments})
    return sorted({r["kind"] for r in RECALL.call(store, args, ["/knob"])["results"]})


out = {
    "module": __import__("stash_pipeline").__file__,
    "schema": RECALL.arguments.model_json_schema()["properties"].get("only_kind"),
    "flag": "--only-kind" in CliRunner().invoke(cli, ["recall", "--help"]).output,
    "both": kinds(),
    "episodes": kinds(only_kind="episode"),
    "facts": kinds(only_kind="fact"),
}
store.close()
print(json.dumps(out))
'''


def test_three_edits_add_a_recall_knob_everywhere(tmp_path: Path, database_url: str) -> None:
    copy = copy_package(tmp_path)
    for name, replacements in EDITS.items():
        path = copy / name
        text = path.read_text()
        for old, new in replacements:
            assert text.count(old) == 1, (name, old)
            text = text.replace(old, new)
        path.write_text(text)
    changed = [p for p in copy.rglob("*") if p.is_file()
               and p.read_bytes() != (ROOT / "stash_pipeline" / p.relative_to(copy)).read_bytes()]
    assert len(changed) == 3

    out = run_probe(tmp_path, PROBE, database_url)
    assert out["schema"] is not None and "Only facts or only episodes." in json.dumps(out["schema"])
    assert out["flag"]
    assert out["both"] == ["episode", "fact"]
    assert out["episodes"] == ["episode"] and out["facts"] == ["fact"]
