"""One recall as a frozen value: built and checked once, then carried through every step.

The ``recall`` operation (or a caller of the library) builds a ``RecallRequest`` with
``RecallRequest.of``, which checks what no argument model checks — the query's text
against the content limits, the mode — and takes the rest as parsed (paths, limit, times,
``max_tokens``, ``context``: the operation's argument model parses them). The steps after
it (``parameters``, ``vectors``, ``statement``, ``grouping``, ``shape``) read its fields
and never check them again.

A knob callers see is three edits: a field of the ``recall`` operation's argument model
(``operations/recall.py``), the field of the same name here, and the step that uses it —
``recall/queries/recall.sql`` reads every field as ``%(name)s``
(``parameters.statement_parameters``), any step reads it from the request.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from stash_pipeline import errors
from stash_pipeline.memory import validate
from stash_pipeline.recall.config import DEFAULT, RecallConfig

if TYPE_CHECKING:
    from stash_pipeline.config import Settings

MODES = ("hybrid", "vector", "text")


@dataclass(frozen=True, slots=True)
class RecallRequest:
    """What to recall and how: the question, the trees, the times, the answer's size, the tuning."""

    #: the question, checked text
    query: str
    #: namespace paths ("/" = every namespace)
    paths: tuple[str, ...]
    limit: int = validate.RECALL_LIMIT_DEFAULT
    #: event time: facts valid then, episodes that had occurred by then (None: now)
    as_of: datetime | None = None
    #: system time: what Stash had recorded and not withdrawn or forgotten then (None: now)
    known_at: datetime | None = None
    #: retired facts too (without a time)
    include_history: bool = False
    #: the answer's budget in tokens, counted on the serialised results
    max_tokens: int | None = None
    mode: str = "hybrid"
    #: turns of the same session around each episode hit
    context: int = 0
    #: each result's score parts and what it groups
    include_score_parts: bool = False
    config: RecallConfig = DEFAULT

    @classmethod
    def of(cls, settings: Settings, query: Any, namespaces: list[str], **options: Any) -> RecallRequest:
        """A checked request: ``query``'s text and ``mode`` are checked here, the rest taken as parsed."""
        if not isinstance(namespaces, list | tuple):
            # a bare string would read as its characters ("/" in "/a" holds): a caller's mistake
            raise TypeError("recall takes the namespace paths as a list (validate.slugs parses a comma string)")
        mode = options.get("mode", "hybrid")
        if mode not in MODES:
            raise errors.InvalidInput(f"mode must be one of {', '.join(MODES)}")
        text = validate.content(settings, query, "query")
        return cls(query=text, paths=tuple(namespaces), **options)

    @property
    def use_vector(self) -> bool:
        return self.mode in ("hybrid", "vector")

    @property
    def use_text(self) -> bool:
        return self.mode in ("hybrid", "text")

    @property
    def hybrid(self) -> bool:
        return self.mode == "hybrid"

    @property
    def all_namespaces(self) -> bool:
        return "/" in self.paths

    def with_config(self, config: RecallConfig) -> RecallRequest:
        """The same request ranked with other tuning (a bench variant)."""
        return replace(self, config=config)
