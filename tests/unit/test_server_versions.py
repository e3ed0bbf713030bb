"""The supported servers: PostgreSQL 15–18 with pgvector >= 0.8, refused with a reason otherwise."""

from __future__ import annotations

import pytest

from stash_pipeline.db.server import ServerVersions


def versions(num: int, installed: str | None = "0.8.0", available: str | None = "0.8.0") -> ServerVersions:
    return ServerVersions(version_num=num, version=f"{num // 10_000}.2", vector_installed=installed,
                          vector_available=available)


@pytest.mark.parametrize("num", [150020, 160004, 170002, 180001])
def test_tested_majors_with_pgvector_08_pass(num):
    assert versions(num).problems() == [] and versions(num).warnings() == []
    assert versions(num, installed=None).problems() == []  # before the first migration


def test_an_older_major_is_refused():
    (problem,) = versions(140011).problems()
    assert "PostgreSQL 14.2 is not supported" in problem and "15–18" in problem


def test_a_newer_major_is_used_with_a_warning():
    assert versions(190000).problems() == []
    assert "newer than any Stash was tested on" in versions(190000).warnings()[0]


def test_pgvector_without_iterative_scans_is_refused():
    (problem,) = versions(170002, installed=None, available="0.7.4").problems()
    assert "offers pgvector 0.7.4" in problem and ">= 0.8.0" in problem
    (problem,) = versions(170002, installed="0.6.0", available="0.6.0").problems()
    assert "pgvector 0.6.0 is too old" in problem


def test_an_installed_extension_older_than_the_server_offers_is_told_to_update():
    (problem,) = versions(170002, installed="0.7.0", available="0.8.1").problems()
    assert "ALTER EXTENSION vector UPDATE" in problem


def test_no_pgvector_at_all():
    (problem,) = versions(170002, installed=None, available=None).problems()
    assert "no pgvector extension" in problem
