"""`stash entities show|merge|split` against a real PostgreSQL (click's CliRunner, hash embedder)."""

from __future__ import annotations

from tests.integration import test_cli
from tests.integration.test_cli import Run, as_json

# the CLI fixtures of test_cli.py: a CliRunner on this test's database
cli_env = test_cli.cli_env
run = test_cli.run


def test_show_merge_and_split(run: Run) -> None:
    run("namespace", "create", "/team")
    for content, entity in (("Alice reviews every release", "Alice"), ("Ally leads the Lisbon office", "Ally")):
        run("fact", "assert", content, "-n", "/team", "--entity", entity, "--property", "note", "--value", "x")
    alice = as_json(run("entities", "show", "alice", "-n", "/team", "--json"))
    ally = as_json(run("entities", "show", "Ally", "--json"))
    keep, other = alice["entity"]["id"], ally["entity"]["id"]

    shown = run("entities", "show", str(keep)).output
    assert shown.startswith(f"entity {keep} in /team: Alice\naliases: Alice\n")
    assert "Alice reviews every release" in shown

    merged = run("entities", "merge", str(keep), str(other), "--note", "same person").output
    assert merged == f"merged entity {other} into {keep}: aliases ally, 1 fact(s), 0 relationship end(s)\n"
    assert len(as_json(run("entities", "show", "Ally", "--json"))["facts"]) == 2

    split = run("entities", "split", str(keep), "Ally").output
    assert split == f"split Ally from entity {keep} into revived entity {other}: 1 fact(s), 0 relationship end(s)\n"
    assert as_json(run("entities", "show", "Ally", "--json"))["entity"]["id"] == other

    missing = run("entities", "show", "Zed", expect=2)
    assert missing.output.startswith("error: no entity is named 'Zed'")
