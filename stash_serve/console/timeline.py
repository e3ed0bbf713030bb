"""A property's bi-temporal timeline as an SVG picture, drawn on the server.

Each value the property had (every fact with that entity and property, history included)
is one bar on the event-time axis: from ``valid_from`` to ``valid_until``, or to the
right edge with an arrow when it is open. Bars are stacked by system time, the first
learned at the top, and each is annotated with when Stash learned it and when it stopped
believing it (superseded, ended or withdrawn): reading across shows what was true when,
reading down what was known when. A dashed line marks now.

Every stored text is escaped here (the picture reaches the page as markup); colours are
SVG presentation attributes, which the console's Content-Security-Policy allows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from markupsafe import Markup, escape

from stash_pipeline.models import Fact

WIDTH = 900
LABEL_W = 170  #: the left column holding each bar's value
RIGHT_PAD = 24
TOP = 34  #: room for the axis and its tick labels
ROW_H = 40
BAR_H = 16
COLOURS = {"current": "#1b7f3b", "superseded": "#8a6d00", "ended": "#5d6878", "withdrawn": "#b3261e",
           "not yet valid": "#2357c6"}


@dataclass(frozen=True)
class State:
    """A fact's state as the console names it: ``current`` or how it was retired."""

    name: str

    @property
    def current(self) -> bool:
        return self.name == "current"

    @property
    def colour(self) -> str:
        return COLOURS.get(self.name, "#5d6878")


def state(fact: Fact, now: datetime | None = None) -> State:
    """``current``, else ``withdrawn``, ``superseded``, ``not yet valid`` or ``ended``."""
    now = now or datetime.now(UTC)
    if fact.current:
        return State("current")
    if fact.withdrawn_at is not None:
        return State("withdrawn")
    if fact.superseded_by is not None:
        return State("superseded")
    if fact.valid_from > now:
        return State("not yet valid")
    return State("ended")


def known_since(fact: Fact) -> datetime:
    """When Stash learned the fact (system time)."""
    return fact.recorded_at or fact.created_at


def retired(fact: Fact) -> datetime | None:
    """When Stash stopped believing the fact as recorded (withdrawn, superseded or ended)."""
    return fact.retired_at or fact.withdrawn_at


def ordered(facts: Sequence[Fact]) -> list[Fact]:
    """The facts in the picture's order: by when they were learned, then by id."""
    return sorted(facts, key=lambda f: (known_since(f), f.id))


#: tick steps for the time axis: (unit, how many), the first giving at most MAX_TICKS wins
STEPS = (("hour", 1), ("hour", 3), ("hour", 6), ("hour", 12), ("day", 1), ("day", 2), ("day", 7), ("day", 14),
         ("month", 1), ("month", 2), ("month", 3), ("month", 6), ("year", 1), ("year", 2), ("year", 5),
         ("year", 10), ("year", 25), ("year", 50), ("year", 100), ("year", 250), ("year", 1000))
MAX_TICKS = 7
APPROX = {"hour": timedelta(hours=1), "day": timedelta(days=1), "month": timedelta(days=30.44),
          "year": timedelta(days=365.25)}
FORMAT = {"hour": "%m-%d %H:%M", "day": "%Y-%m-%d", "month": "%Y-%m", "year": "%Y"}


def ticks(lo: datetime, hi: datetime) -> tuple[list[datetime], str]:
    """Round moments in [lo, hi] for the axis (whole hours, days, months or years), and
    the strftime format their labels take."""
    unit, n = next(((u, k) for u, k in STEPS if (hi - lo) / (APPROX[u] * k) <= MAX_TICKS), STEPS[-1])
    first: datetime | None
    if unit == "year":
        year = lo.year + (lo > datetime(lo.year, 1, 1, tzinfo=UTC))
        year += -year % n
        first = datetime(year, 1, 1, tzinfo=UTC) if year <= 9999 else None
    elif unit == "month":
        index = lo.year * 12 + lo.month - 1
        index = index - index % n + n
        first = datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)
    else:
        step_h = n * (24 if unit == "day" else 1)
        base = datetime(lo.year, lo.month, lo.day, tzinfo=UTC)
        first = base + timedelta(hours=step_h * -(-((lo - base) / timedelta(hours=1)) // step_h))
    out: list[datetime] = []
    moment = first
    while moment is not None and moment <= hi and len(out) <= MAX_TICKS * 2:
        out.append(moment)
        try:
            if unit == "year":
                moment = moment.replace(year=moment.year + n)
            elif unit == "month":
                index = moment.year * 12 + moment.month - 1 + n
                moment = moment.replace(year=index // 12, month=index % 12 + 1)
            else:
                moment = moment + timedelta(hours=n * (24 if unit == "day" else 1))
        except (ValueError, OverflowError):
            moment = None
    return out, FORMAT[unit]


def _short(text: str, length: int = 22) -> str:
    return text if len(text) <= length else text[: length - 1] + "…"


def _day(moment: datetime | None) -> str:
    return "—" if moment is None else moment.strftime("%Y-%m-%d %H:%M")


def draw(facts: Sequence[Fact], *, highlight: int | None = None, now: datetime | None = None) -> Markup:
    """The timeline of ``facts`` (one entity's property) as an ``<svg>``; ``highlight``: the
    fact the page is about, outlined. No facts: an empty string."""
    rows = ordered(facts)
    if not rows:
        return Markup("")
    now = now or datetime.now(UTC)
    starts = [f.valid_from for f in rows]
    ends = [f.valid_until for f in rows if f.valid_until is not None]
    lo = min(starts)
    hi = max([now, *starts, *ends, lo + timedelta(days=1)])
    span = hi - lo
    lo, hi = lo - span * 0.03, hi + span * 0.06
    span = hi - lo
    x0, x1 = LABEL_W, WIDTH - RIGHT_PAD

    def x(moment: datetime) -> float:
        return round(x0 + (x1 - x0) * ((moment - lo) / span), 1)

    height = TOP + ROW_H * len(rows) + 8
    out = [
        f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}" role="img" aria-labelledby="timeline-title">',
        '<title id="timeline-title">Each value as a bar over the time it was true (left to right), '
        "stacked by when Stash learned it (top to bottom)</title>",
        f'<text x="4" y="{TOP - 12}" fill="#5d6878">value</text>',
        f'<text x="{x1}" y="11" text-anchor="end" fill="#5d6878" font-size="11">valid time →</text>',
        f'<line x1="{x0}" y1="{TOP - 6}" x2="{x1}" y2="{TOP - 6}" stroke="#d9dee6"/>',
    ]
    marks, fmt = ticks(lo, hi)
    for moment in marks:
        tx = x(moment)
        out.append(f'<line x1="{tx}" y1="{TOP - 9}" x2="{tx}" y2="{height - 4}" stroke="#eef1f5"/>')
        out.append(f'<text x="{tx}" y="{TOP - 12}" text-anchor="middle" fill="#5d6878">'
                   f"{escape(moment.strftime(fmt))}</text>")
    nx = x(now)
    out.append(f'<line class="now" x1="{nx}" y1="{TOP - 6}" x2="{nx}" y2="{height - 4}" stroke="#1d2430" '
               'stroke-dasharray="4 3"/>')
    out.append(f'<text x="{nx - 3}" y="{height - 6}" text-anchor="end" fill="#1d2430">now</text>')
    for row, fact in enumerate(rows):
        top = TOP + row * ROW_H
        st = state(fact, now)
        start = x(fact.valid_from)
        end = x1 if fact.valid_until is None else x(fact.valid_until)
        width = max(end - start, 3)
        value = fact.value if fact.value is not None else fact.content
        until = "open" if fact.valid_until is None else _day(fact.valid_until)
        gone = retired(fact)
        tip = (f"#{fact.id} {value}: true {_day(fact.valid_from)} → {until}; learned {_day(known_since(fact))}"
               + (f", {st.name} {_day(gone)}" if gone is not None and not st.current else f", {st.name}"))
        outline = ' stroke="#1d2430" stroke-width="2"' if fact.id == highlight else ""
        out.append(f'<g class="row" data-fact="{fact.id}" data-state="{escape(st.name)}">')
        out.append(f"<title>{escape(tip)}</title>")
        out.append(f'<text x="4" y="{top + BAR_H - 3}" fill="#1d2430">{escape(_short(value))}</text>')
        kind, opacity = ("current", "1") if st.current else ("retired", "0.55")
        out.append(f'<rect class="bar {kind}" x="{start}" y="{top + 2}" width="{round(width, 1)}" '
                   f'height="{BAR_H}" rx="3" fill="{st.colour}" fill-opacity="{opacity}"{outline}/>')
        if fact.valid_until is None:
            out.append(f'<path d="M{x1} {top + 2} l8 {BAR_H / 2} l-8 {BAR_H / 2} z" fill="{st.colour}"/>')
        note = f"learned {_day(known_since(fact))}"
        if not st.current:
            note += f" · {st.name}" + (f" {_day(gone)}" if gone is not None else "")
        if fact.superseded_by is not None:
            note += f" by #{fact.superseded_by}"
        anchor_x = min(start, x1 - 260)
        out.append(f'<text x="{max(anchor_x, x0)}" y="{top + BAR_H + 15}" fill="#5d6878" font-size="11">'
                   f"#{fact.id} · {escape(note)}</text>")
        out.append("</g>")
    out.append("</svg>")
    return Markup("".join(out))
