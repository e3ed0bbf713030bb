"""The shape every paged list over namespace trees shares.

``Page.of(limit, offset)`` validates the page first (so a bad limit is reported before
any other filter); ``page.in_trees(...)`` resolves the trees, runs the list query with
``ns_ids``, ``limit``, ``offset`` and the filters, and returns the library's models::

    page = Page.of(limit, offset)
    status = ...  # validate the other filters
    return page.in_trees(store, "goal_list", Goal, namespaces, status=status)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from stash_pipeline.memory import validate
from stash_pipeline.memory.scope import read_ids, scope_ids, visible
from stash_pipeline.models import Record
from stash_pipeline.store import Store

RecordType = TypeVar("RecordType", bound=Record)


@dataclass(frozen=True)
class Page:
    limit: int
    offset: int

    @classmethod
    def of(cls, limit: int | None, offset: int | None) -> Page:
        """A validated page (see ``validate.page``)."""
        valid_limit, valid_offset = validate.page(limit, offset)
        return cls(valid_limit, valid_offset)

    def in_trees(
        self,
        store: Store,
        query_name: str,
        model: type[RecordType],
        namespaces: str | Sequence[str] | None,
        *,
        refs_within: Sequence[str] | None = None,
        **filters: object,
    ) -> list[RecordType]:
        """One page of ``query_name`` over the namespace trees, as ``model`` records;
        ``refs_within`` (the caller's trees, None: anywhere) bounds the ids a row may show
        of other records, for queries that take ``scope.visible`` parameters."""
        with store.db.transaction() as tx:
            rows = tx.all(
                query_name,
                ns_ids=read_ids(tx, namespaces),
                limit=self.limit,
                offset=self.offset,
                **visible(scope_ids(tx, refs_within)),
                **filters,
            )
        return [model.from_row(row) for row in rows]
