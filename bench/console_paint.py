"""Console first paint — every console page in headless Chromium on a 100,000-memory store.

    python -m bench.console_paint              # 100,000 memories, 5 warm loads a page
    python -m bench.console_paint --quick      # 2,000 memories, 2 warm loads: a smoke run
    python -m bench.console_paint --size N --runs K
    python -m bench.console_paint --reuse      # keep the filled store in bench/out/, reuse it next time
    STASH_DATABASE_URL=... python -m bench.console_paint --keep NAME   # the same on that server

The store: ``bench/recall_latency.py``'s fill (80% episodes, 20% facts in /bench/recall, by
COPY with the dataset texts' MiniLM vectors plus noise; one entity per ten memories with
aliases and three relationships each, every fact about one of them), the lineage of
``bench/grouping_latency.py`` (fact n rests on episodes 4n-1 and 4n, as a hash join), then
each fact's entity name, a property and a value, and one hub entity that every 20th fact
is about (1,000 at 100,000: 200 properties, about five statements each). Beside it, three small namespaces filled through the operations an
agent calls (``remember_batch``, ``assert_fact`` with sources and a superseded value), so
the tree has several namespaces; the COPY fill is ``--size`` minus them. The server embeds
with MiniLM (``minilm``), as recall_latency's store does.

The server: ``stash serve mcp --transport http`` (one worker, tokens on) in a subprocess,
up once /readyz says ready, signed into by an admin token sent as ``Authorization:
Bearer`` with every request (``Network.setExtraHTTPHeaders``).

The pages: the console's home, the episodes timeline, its search for the namespace's
commonest word, one episode, the recall playground for a dataset question, the facts, one
fact (the hub's, with its sources and its property's timeline), the entities, the hub
entity, the pipeline and the erasure preview of the fact's source episode. Each is loaded
once (first load: cold browser and server caches for that page), then ``--runs`` more
times in rounds over all pages (warm). A load is a new document (``about:blank`` first);
its time is the page's own ``first-contentful-paint`` entry, with the navigation's
``responseEnd`` and its server time (``responseStart - requestStart``: the server's work
plus one loopback trip). A route that answers 404 with no HTML page is not there yet: it
is listed as skipped. The baseline, in the same run: the login page, drawn with the same
template and stylesheet, reading no memory.

Target: every page's first paint under 1 s, first load and warm maximum alike.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlencode

from bench import capacity, common, recall_latency
from bench.browser_paint import Browser, Timing, load
from bench.data import generate
from stash_pipeline.db.sql import parse

SQL = parse((Path(__file__).parent / "console_paint.sql").read_text(encoding="utf-8"), "bench/console_paint.sql")
TARGET_MS = 1000.0
QUICK_SIZE = 2_000
#: the small namespaces written through the operations, and the episodes each gets
SIDE_NAMESPACES = ("/bench/console/alpha", "/bench/console/beta", "/bench/console/gamma")
SIDE_EPISODES = 100
#: the superseded values of the side timeline (entity "Alice", property "city")
TIMELINE = ("Lisbon", "Paris", "Berlin", "Oslo")
SIDE_MEMORIES = len(SIDE_NAMESPACES) * SIDE_EPISODES + len(TIMELINE)
BASELINE = "login page (baseline: reads no memory)"


@dataclass(frozen=True)
class Targets:
    """What the pages open: the records by id, the search word, the recall question."""

    episode: int
    fact: int
    entity: int
    word: str
    question: str
    namespace: str = recall_latency.NAMESPACE


def pages(t: Targets) -> list[tuple[str, str]]:
    """(label, path) of every page measured, the baseline first."""
    return [
        (BASELINE, "/console/login"),
        ("home: namespaces", "/console/"),
        ("episodes", "/console/episodes"),
        (f"episodes, search {t.word!r}", "/console/episodes?" + urlencode({"q": t.word})),
        ("episode", f"/console/episodes/{t.episode}"),
        ("recall", "/console/recall?" + urlencode({"q": t.question, "ns": t.namespace}, quote_via=quote)),
        ("facts", "/console/facts"),
        ("fact (the hub's)", f"/console/facts/{t.fact}"),
        ("entities", "/console/entities"),
        ("entity (the hub)", f"/console/entities/{t.entity}"),
        ("pipeline", "/console/pipeline"),
        ("erase episode (preview)", f"/console/erase/episode/{t.episode}"),
    ]


# --- the store ---------------------------------------------------------------------------


def call(store: Any, name: str, **values: Any) -> Any:
    """An operation as an unrestricted caller (a shell) runs it."""
    from stash_pipeline.operations import SUBJECTS
    from stash_pipeline.operations.base import UNRESTRICTED

    op = next(o for subject in SUBJECTS for o in subject.OPERATIONS if o.name == name)
    return op.invoke(store, UNRESTRICTED, op.parse(values))


def fill_side(store: Any) -> int:
    """The small namespaces, through the operations (skipped when a kept store has them); memories added."""
    with store.db.transaction() as tx:
        if tx.conn.execute("SELECT 1 FROM namespaces WHERE slug = %(slug)s", {"slug": SIDE_NAMESPACES[0]}).fetchone():
            return 0
    texts = [e["content"] for e in generate.load()["episodes"]][:SIDE_EPISODES]
    common.prime_embedding_cache(store, texts, common.dataset_vectors(texts))
    timeline = [f"Alice lives in {city}" for city in TIMELINE]
    common.prime_embedding_cache(store, timeline, common.dataset_vectors(timeline))
    sources: list[int] = []
    for path in SIDE_NAMESPACES:
        call(store, "create_namespace", namespace=path, description="console bench: written through the operations")
        done = call(store, "remember_batch", namespace=path, items=[{"content": t} for t in texts])
        sources.append(done.results[0].id)
    for year, (text, city) in enumerate(zip(timeline, TIMELINE, strict=True)):
        call(store, "assert_fact", content=text, namespace=SIDE_NAMESPACES[0], entity="Alice", property="city",
             value=city, source_episode_ids=[sources[0]], supersede=True, valid_from=f"{2023 + year}-01-01T00:00:00Z")
    return SIDE_MEMORIES


def build(store: Any, size: int) -> tuple[Targets, dict[str, Any]]:
    """Fill (or find) the store of ``size`` memories; the pages' targets and what the store holds."""
    from stash_pipeline.memory import namespaces

    began = time.perf_counter()
    bulk = max(10, size - SIDE_MEMORIES)
    questions, _ = recall_latency.fill(store, bulk, {})
    recall_latency.fill_entities(store, bulk)
    with store.db.transaction() as tx:
        namespace_id = namespaces.resolve_id(tx, recall_latency.NAMESPACE)
        filled = tx.conn.execute("SELECT count(*) AS n FROM lineage WHERE namespace_id = %(ns)s",
                                 {"ns": namespace_id}).fetchone()["n"]
        if not filled:  # a kept store has them already
            tx.conn.execute(SQL["console_paint_lineage"], {"namespace_id": namespace_id})
            tx.conn.execute(SQL["console_paint_properties"], {"namespace_id": namespace_id})
            tx.conn.execute(SQL["console_paint_hub_off"])
            tx.conn.execute(SQL["console_paint_hub"], {"namespace_id": namespace_id})
            tx.conn.execute(SQL["console_paint_hub_on"])
    fill_side(store)
    with store.db.transaction() as tx:
        tx.conn.execute(common.sql("bench_entity_analyze"))
        tx.conn.execute("ANALYZE episodes, lineage")
    with store.db.transaction() as tx:
        target = tx.conn.execute(SQL["console_paint_targets"], {"namespace_id": namespace_id}).fetchone()
        word = tx.conn.execute(SQL["console_paint_word"],
                               {"namespace_id": namespace_id, "most": max(1, bulk // 5)}).fetchone()
        counts = dict(tx.conn.execute(SQL["console_paint_counts"], {"hub": target["entity"]}).fetchone())
    counts["fill seconds"] = time.perf_counter() - began
    counts["reused"] = bool(filled)
    counts["word documents"] = word["documents"]
    return Targets(episode=int(target["episode"]), fact=int(target["fact"]), entity=int(target["entity"]),
                   word=str(word["word"]), question=questions[0]), counts


# --- the loads ---------------------------------------------------------------------------


@dataclass
class PageTimes:
    """Every load of one page."""

    label: str
    path: str
    first: Timing | None = None
    warm: list[Timing] = field(default_factory=list)
    skipped: str = ""

    @property
    def loads(self) -> list[Timing]:
        return ([self.first] if self.first else []) + self.warm

    def warm_paint(self) -> list[float]:
        return [t.first_contentful_paint_ms for t in self.warm]

    def verdict(self) -> str:
        if self.skipped:
            return "skipped"
        if any(t.status != 200 for t in self.loads):
            return f"**error** (HTTP {sorted({t.status for t in self.loads if t.status != 200})})"
        worst = max(t.first_contentful_paint_ms for t in self.loads)
        return "met" if worst < TARGET_MS else "**missed**"


def not_there(timing: Timing) -> bool:
    """A route the console does not have yet: a 404 that is not an HTML page (a page's own 404 is)."""
    return timing.status == 404 and timing.content_type != "text/html"


def measure(browser: Browser, base: str, wanted: Sequence[tuple[str, str]], runs: int) -> list[PageTimes]:
    """The first load of each page in turn, then ``runs`` rounds over the pages that are there."""
    times = [PageTimes(label, path) for label, path in wanted]
    for page in times:
        first = load(browser, base + page.path)
        if not_there(first):
            page.skipped = "not there yet (404)"
        else:
            page.first = first
    for _ in range(runs):
        for page in times:
            if not page.skipped:
                page.warm.append(load(browser, base + page.path))
    return times


def rows(times: Sequence[PageTimes]) -> list[list[Any]]:
    """The results table: per page its first load, warm median / max, response end, server time."""
    baseline = next((p for p in times if p.label == BASELINE and p.warm), None)
    floor = statistics.median(baseline.warm_paint()) if baseline else None
    out: list[list[Any]] = []
    for page in times:
        if page.skipped or page.first is None:
            out.append([page.label, f"`{unquote(page.path)}`", "—", "—", "—", "—", "—", "—", page.skipped or "no load"])
            continue
        warm = page.warm_paint() or [page.first.first_contentful_paint_ms]
        median = statistics.median(warm)
        over = "—" if floor is None or page.label == BASELINE else f"{median - floor:+.0f}"
        out.append([
            page.label, f"`{unquote(page.path)}`", f"{page.first.first_contentful_paint_ms:.0f}",
            f"{median:.0f} / {max(warm):.0f}", over,
            f"{statistics.median(t.response_end_ms for t in page.loads):.0f}",
            f"{statistics.median(t.server_ms for t in page.loads):.0f}",
            f"{page.first.server_ms:.0f}", page.verdict(),
        ])
    return out


HEADERS = ["page", "path", "first load FCP (ms)", "warm FCP median / max (ms)", "median over baseline (ms)",
           "responseEnd median (ms)", "server median (ms)", "server, first load (ms)", "< 1 s"]


@contextlib.contextmanager
def console(store: Any) -> Iterator[tuple[str, str]]:
    """The real server for ``store`` and an admin token: (base URL, token)."""
    from stash_pipeline import auth

    token = auth.create_token(store, ["/"], ["admin"], name="console paint bench")["token"]
    with tempfile.TemporaryDirectory(prefix="stash-paint-home-") as home, \
            capacity.stash_server(store, Path(home), 1) as server:
        yield server.url.removesuffix("/mcp"), token


Serve = Callable[[Any], contextlib.AbstractContextManager[tuple[str, str]]]


def run(store: Any, size: int, runs: int, serve: Serve = console) -> tuple[Targets, dict[str, Any], list[PageTimes]]:
    """Build the store, serve it (``serve(store)``: base URL and an admin token), load every
    page; everything the tables need."""
    targets, counts = build(store, size)
    common.log(f"store ready: {counts}; serving it")
    with serve(store) as (base, token), Browser() as browser:
        browser.set_headers({"Authorization": f"Bearer {token}"})
        common.log(f"{base}: loading {len(pages(targets))} pages, 1 + {runs} times each")
        times = measure(browser, base, pages(targets), runs)
    return targets, counts, times


@common.writes_results
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000, help="memories (default 100000)")
    parser.add_argument("--quick", action="store_true", help=f"a smoke run: {QUICK_SIZE:,} memories, 2 warm loads")
    parser.add_argument("--runs", type=int, default=5, help="warm loads of each page after the first (default 5)")
    kept = parser.add_mutually_exclusive_group()
    kept.add_argument("--keep", metavar="NAME", help="fill database NAME on STASH_DATABASE_URL's server once, keep it")
    kept.add_argument("--reuse", action="store_true",
                      help="keep the filled store in bench/out/console-paint-<size>/ (an embedded PostgreSQL) and "
                           "reuse it on the next run of the same size")
    args = parser.parse_args(argv)
    size, runs = (QUICK_SIZE, min(args.runs, 2)) if args.quick else (args.size, args.runs)
    with contextlib.ExitStack() as stack:
        if args.reuse:
            url = stack.enter_context(kept_server(size))
            store = stack.enter_context(common.fresh_store("minilm", keep=f"console_paint_{size}", server_url=url))
        else:
            store = stack.enter_context(common.fresh_store("minilm", keep=args.keep))
        targets, counts, times = run(store, size, runs)
    report(size, runs, targets, counts, times)


@contextlib.contextmanager
def kept_server(size: int) -> Iterator[str]:
    """An embedded PostgreSQL whose data stays in ``bench/out/console-paint-<size>/`` (git-ignored),
    started for the run and stopped after it; its maintenance database's URL."""
    from stash_pipeline.config import load_settings
    from stash_pipeline.db.embedded import EmbeddedServer

    home = common.OUT / f"console-paint-{size}"
    server = EmbeddedServer(load_settings(home=home, db_port=common._free_port(), embedder="hash"))
    server.start()
    common.log(f"the kept store's server: {home}")
    try:
        yield server.url("postgres")
    finally:
        server.stop()


def report(size: int, runs: int, targets: Targets, counts: dict[str, Any], times: Sequence[PageTimes]) -> None:
    memories = counts["episodes"] + counts["facts"]
    common.print_table(
        f"Console first paint, {memories:,} memories ({counts['episodes']:,} episodes + {counts['facts']:,} facts, "
        f"{counts['namespaces']} namespaces), headless Chromium, admin token; first load, then {runs} warm loads "
        f"a page — target < 1 s", HEADERS, rows(times))
    store_rows = [
        ["memories asked (--size)", f"{size:,}"],
        ["episodes / facts", f"{counts['episodes']:,} / {counts['facts']:,}"],
        ["entities / relationships / lineage edges", f"{counts['entities']:,} / {counts['relationships']:,} / "
                                                     f"{counts['lineage']:,}"],
        ["namespaces", counts["namespaces"]],
        ["how", "recall_latency's COPY fill (MiniLM vectors of the dataset texts + noise) and entities, "
                "grouping_latency's lineage, properties and a hub entity; 3 namespaces through the operations"],
        ["embedder (server)", "minilm"],
        ["build seconds (fill, index builds, side namespaces)",
         "0: a kept store, filled by an earlier run" if counts["reused"] else f"{counts['fill seconds']:.0f}"],
        ["hub entity (its facts)", f"{targets.entity} ({counts['hub_facts']:,})"],
        ["fact / episode opened", f"{targets.fact} / {targets.episode}"],
        ["search word (memories holding it)", f"{targets.word!r} ({counts['word documents']:,})"],
        ["recall question", targets.question],
    ]
    common.print_table("The store the pages read", ["what", "value"], store_rows)


if __name__ == "__main__":
    main()
