"""What the facts stage shows the model: conversation windows and embedding clusters.

A chat imported one turn per episode gives turns too short to cluster by meaning ("Oh
no! Is she okay?"), and a turn read alone loses who "you" and "she" are. So the facts
stage reads conversational episodes as WINDOWS of their thread, and everything else as
embedding clusters (``facts.cluster``).

A thread (one session of one conversation) is identified, per episode, by the first rule
that applies:

1. metadata ``thread_id``, ``session_id``, ``conversation_id``, ``thread`` or ``session``
   (a string or number): episodes with the same key and value share a thread;
2. metadata ``dia_id`` of the form ``"<session>:<turn>"`` (``"D3:7"``, the way chat-history
   benchmarks label turns): episodes whose ids share the part before the last colon;
3. otherwise time proximity: a turn that names its speaker (content ``"Name: text"``, or
   metadata ``speaker`` / ``author`` / ``sender``) continues the open thread of its
   namespace when it occurred at most ``THREAD_GAP`` after (or before) that thread's last
   turn, else it starts a new one. A proximity thread whose turns — with the turns just
   before it, which an earlier batch may hold — name fewer than two speakers is not a
   conversation ("Error: ...", "TODO: ..." lines): its episodes are clustered as usual.

Each thread's new turns (id order) are cut into windows of at most ``WINDOW_TURNS``, in
nearly equal parts. Each window is shown with

* up to ``CONTEXT_TURNS`` turns of the same thread just before it (already consolidated,
  or in an earlier window of the batch), looked for among the ``CONTEXT_SCAN`` episodes
  of the namespace before the window — a bounded read however large the namespace; a
  thread interleaved with more than that many other episodes is shown without them;
* the thread's participants: the speakers of the turns shown plus metadata
  ``participants``;
* what earlier sessions established: up to ``KNOWN_FACTS`` stored facts about the
  participants, the nearest to the window's new turns, listed for reference and not
  citable (a fact may name what they name: "switched the trip from Lisbon to Kyoto" when
  only an earlier session named Lisbon).

The model may cite any turn shown; a fact must rest on at least one new turn. A window is
one model call — short windows of several threads share one, up to the turns of a full
window — so a thread costs at most ``ceil(new turns / WINDOW_TURNS)`` calls plus retries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from stash_pipeline.embedding.vectors import unit_vector

if TYPE_CHECKING:
    from stash_pipeline.stages.context import StageContext

#: new turns per window (one model call); a longer run of a thread is cut into equal parts
WINDOW_TURNS = 20
#: earlier turns of the same thread shown before a window's new turns
CONTEXT_TURNS = 10
#: turns further apart than this do not continue a thread identified by time alone
THREAD_GAP = timedelta(minutes=30)
#: a window's earlier turns are looked for among this many episodes of the namespace before it
CONTEXT_SCAN = 500
#: facts already stored about the participants shown with a window (the nearest to its new
#: turns among the newest ``KNOWN_SCAN``): what earlier sessions established
KNOWN_FACTS = 8
KNOWN_SCAN = 300

THREAD_KEYS = ("thread_id", "session_id", "conversation_id", "thread", "session")
SPEAKER_KEYS = ("speaker", "author", "sender")
#: "Caroline: text", "Mr. Alvarez: text" — one to three capitalised words, then ": "
_SPEAKER = re.compile(r"^\s*([A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,2}):\s+\S")
_DIA_ID = re.compile(r"^(.+):\d+$")


@dataclass
class Group:
    """One question to the model: the new episodes it derives facts from, and what it sees with them."""

    new: list[dict[str, Any]]
    #: earlier turns of the same thread, shown before the new ones (citable)
    context: list[dict[str, Any]] = field(default_factory=list)
    participants: list[str] = field(default_factory=list)
    #: facts already stored about the participants (texts; shown for reference, not citable)
    known: list[str] = field(default_factory=list)
    #: how the thread was identified ("session_id=abc", "dia_id=D3", "time"); None = a cluster
    thread: str | None = None

    @property
    def conversational(self) -> bool:
        return self.thread is not None

    @property
    def shown(self) -> list[dict[str, Any]]:
        return self.context + self.new

    @property
    def new_ids(self) -> list[int]:
        return [int(r["id"]) for r in self.new]


def _metadata(row: dict[str, Any]) -> dict[str, Any]:
    meta = row.get("metadata")
    return meta if isinstance(meta, dict) else {}


def speaker(row: dict[str, Any]) -> str | None:
    """Who said this turn: metadata speaker/author/sender, else the ``Name:`` the content starts with."""
    meta = _metadata(row)
    for key in SPEAKER_KEYS:
        value = meta.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    match = _SPEAKER.match(row.get("content") or "")
    return match.group(1) if match else None


def explicit_thread(row: dict[str, Any]) -> str | None:
    """The thread metadata names (rules 1 and 2), as ``key=value``; None when it names none."""
    meta = _metadata(row)
    for key in THREAD_KEYS:
        value = meta.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
            return f"{key}={value}"
    dia = meta.get("dia_id")
    if isinstance(dia, str):
        match = _DIA_ID.match(dia.strip())
        if match:
            return f"dia_id={match.group(1)}"
    return None


def text(row: dict[str, Any]) -> str:
    """A turn as the model reads it: with its speaker's name in front when metadata names it."""
    content = row.get("content") or ""
    who = speaker(row)
    if who and not content.lstrip().startswith(f"{who}:"):
        return f"{who}: {content}"
    return content


def threads(rows: list[dict[str, Any]]) -> tuple[list[tuple[str, list[dict[str, Any]]]], list[dict[str, Any]]]:
    """Split a batch (id order) into threads and the rest (to be clustered).

    A thread found by time alone is a conversation only if it names two speakers, counting
    the turns just before it (``windows`` decides, as it reads them).
    """
    by_key: dict[str, list[dict[str, Any]]] = {}
    timed: list[list[dict[str, Any]]] = []
    rest: list[dict[str, Any]] = []
    for row in rows:
        key = explicit_thread(row)
        if key is not None:
            by_key.setdefault(key, []).append(row)
        elif speaker(row) is None:
            rest.append(row)
        elif timed and _close(timed[-1][-1], row):
            timed[-1].append(row)
        else:
            timed.append([row])
    found = list(by_key.items()) + [("time", run) for run in timed]
    found.sort(key=lambda item: int(item[1][0]["id"]))
    return found, rest


def _close(before: dict[str, Any], after: dict[str, Any]) -> bool:
    a, b = before.get("occurred_at"), after.get("occurred_at")
    return isinstance(a, datetime) and isinstance(b, datetime) and abs(b - a) <= THREAD_GAP


def split(run: list[dict[str, Any]], size: int = WINDOW_TURNS) -> list[list[dict[str, Any]]]:
    """A thread's new turns in ``ceil(n / size)`` consecutive parts of nearly equal length."""
    parts = -(-len(run) // size)
    bounds = [round(i * len(run) / parts) for i in range(parts + 1)]
    return [run[bounds[i] : bounds[i + 1]] for i in range(parts)]


def context_before(ctx: StageContext, thread: str, first: dict[str, Any], limit: int = CONTEXT_TURNS) -> list[dict[str, Any]]:
    """Up to ``limit`` turns of ``thread`` just before ``first`` (oldest first)."""
    if limit <= 0:
        return []
    key, _, value = thread.partition("=")
    since = None
    if thread == "time":
        occurred = first.get("occurred_at")
        if not isinstance(occurred, datetime):
            return []
        since = occurred - THREAD_GAP
    rows = ctx.read(
        "stage_facts_thread_before",
        namespace_id=ctx.namespace_id,
        before_id=int(first["id"]),
        meta_key=key if key in THREAD_KEYS else None,
        meta_value=value if key in THREAD_KEYS else None,
        dia_session=value if key == "dia_id" else None,
        since=since,
        scan=CONTEXT_SCAN,
        limit=limit if thread != "time" else 4 * limit,
    )
    if thread == "time":  # proximity: only turns that name a speaker and belong to no named thread
        rows = [r for r in rows if explicit_thread(r) is None and speaker(r) is not None][:limit]
    else:
        rows = [r for r in rows if explicit_thread(r) == thread]
    return list(reversed(rows))


def participants(rows: list[dict[str, Any]]) -> list[str]:
    """The speakers of ``rows`` in order of appearance, plus names in metadata ``participants``."""
    names: list[str] = []
    for row in rows:
        listed = _metadata(row).get("participants")
        extra = [p for p in listed if isinstance(p, str)] if isinstance(listed, list) else []
        for name in [speaker(row), *extra]:
            if name and name.strip() and name.strip() not in names:
                names.append(name.strip())
    return names


def windows(ctx: StageContext, run: list[dict[str, Any]], thread: str) -> list[Group] | None:
    """A thread's new turns as windows, each with the thread's turns just before it.

    None for a thread found by time alone whose turns, with those just before them (a
    conversation may have started in an earlier batch), name fewer than two speakers:
    not a conversation.
    """
    parts = split(run)
    first = context_before(ctx, thread, parts[0][0])
    if thread == "time" and len({speaker(r) for r in first + run}) < 2:
        return None
    out = []
    for part in parts:
        earlier = first if part is parts[0] else context_before(ctx, thread, part[0])
        names = participants(earlier + part)
        out.append(Group(new=part, context=earlier, participants=names, thread=thread,
                         known=known_about(ctx, names, part)))
    return out


def known_about(ctx: StageContext, names: list[str], turns: list[dict[str, Any]]) -> list[str]:
    """Up to ``KNOWN_FACTS`` stored facts about ``names``, the nearest to ``turns`` (oldest first)."""
    vectors = [unit_vector(r["embedding"]) for r in turns if r.get("embedding") is not None]
    if not names or not vectors or KNOWN_FACTS <= 0:
        return []
    rows = ctx.read("stage_facts_known_about", namespace_id=ctx.namespace_id, names=[n.lower() for n in names],
                    embedding=unit_vector(np.sum(vectors, axis=0)), scan=KNOWN_SCAN, limit=KNOWN_FACTS)
    return [r["content"] for r in sorted(rows, key=lambda r: int(r["id"]))]


def pack(indices: list[int], sizes: list[int], per_call: int) -> list[list[int]]:
    """Windows (by index, in order) grouped into calls: a call takes windows while the turns
    it shows stay within one full window (``WINDOW_TURNS + CONTEXT_TURNS``) and it holds at
    most ``per_call`` of them, so many short threads do not cost a call each."""
    calls: list[list[int]] = []
    shown = 0
    for i in indices:
        if calls and shown + sizes[i] <= WINDOW_TURNS + CONTEXT_TURNS and len(calls[-1]) < per_call:
            calls[-1].append(i)
            shown += sizes[i]
        else:
            calls.append([i])
            shown = sizes[i]
    return calls


def halves(group: Group) -> list[Group]:
    """A window cut in two (its answer did not fit): the second half sees the first as context."""
    middle = len(group.new) // 2
    first, second = group.new[:middle], group.new[middle:]
    context = (group.context + first)[-CONTEXT_TURNS:]
    return [
        Group(new=first, context=group.context, participants=group.participants, known=group.known,
              thread=group.thread),
        Group(new=second, context=context, participants=group.participants, known=group.known, thread=group.thread),
    ]


def header_date(group: Group) -> str:
    """The date(s) of a window's new turns, as shown to the model (the event time of what they say)."""
    days = sorted({r["occurred_at"].date().isoformat() for r in group.new if isinstance(r.get("occurred_at"), datetime)})
    if not days:
        return ""
    return days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}"
