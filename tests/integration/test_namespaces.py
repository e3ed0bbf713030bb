from __future__ import annotations

import pytest

from stash_pipeline import errors
from stash_pipeline.memory import namespaces


def test_root_exists_from_first_migration(store):
    slugs = [n.slug for n in namespaces.list_(store)]
    assert slugs == ["/"]


def test_create_is_mkdir_p_and_idempotent(store):
    first = namespaces.create(store, "/projects/x/backend", "Backend", "API work")
    assert first.created is True
    assert first.namespace.name == "Backend"
    assert [n.slug for n in namespaces.list_(store)] == ["/", "/projects", "/projects/x", "/projects/x/backend"]
    again = namespaces.create(store, "/projects/x/backend")
    assert again.created is False
    assert again.namespace.name == "Backend"  # an empty name does not overwrite


@pytest.mark.parametrize("bad", ["projects", "/Projects", "/a//b", "/-a", "/a b", "/" + "a" * 65, "", 5, "/a%"])
def test_invalid_slugs_rejected_and_nothing_written(store, bad):
    with pytest.raises(errors.InvalidNamespace):
        namespaces.create(store, bad)
    assert [n.slug for n in namespaces.list_(store)] == ["/"]


def test_list_filters_trees_without_like_leaks(store):
    namespaces.create(store, "/a_b")
    namespaces.create(store, "/axb/c")
    namespaces.create(store, "/a_b/c")
    # '_' must not act as a LIKE wildcard: /axb/c is not under /a_b
    assert [n.slug for n in namespaces.list_(store, ["/a_b"])] == ["/a_b", "/a_b/c"]


def test_delete_needs_confirmation_and_cascades(store):
    namespaces.create(store, "/tmp/one")
    preview = namespaces.delete(store, "/tmp")
    assert preview.deleted is False and preview.namespaces == ["/tmp", "/tmp/one"]
    assert len(namespaces.list_(store, ["/tmp"])) == 2
    done = namespaces.delete(store, "/tmp", confirm=True)
    assert done.deleted is True
    assert namespaces.list_(store, ["/tmp"]) == []
    with pytest.raises(errors.NamespaceNotFound):
        namespaces.show(store, "/tmp")


def test_root_cannot_be_deleted(store):
    with pytest.raises(errors.InvalidInput):
        namespaces.delete(store, "/", confirm=True)


def test_init_self_idempotent(store):
    first = namespaces.init_self(store)
    assert first.namespaces_created == ["/self", "/self/capabilities", "/self/limits", "/self/preferences"]
    assert namespaces.init_self(store).namespaces_created == []
