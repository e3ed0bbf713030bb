"""Shared harness for the benchmarks: a fresh database per run, timing, tables, plots.

* ``fresh_store(embedder=...)`` — a context manager yielding a ``Store`` on a brand-new,
  migrated database, removed afterwards. With ``STASH_DATABASE_URL`` set (a role that may
  create databases) the throwaway database lives on that server; otherwise an embedded
  PostgreSQL is started in a temporary STASH_HOME on a free port and stopped at the end.
* ``summarize(ms)`` / ``percentile`` — p50 / p95 / mean of latencies in milliseconds.
* ``print_table`` — a Markdown table, printed and, in a run of ``@writes_results``'s
  ``main``, kept for ``bench/results/<script>.md`` (``record`` keeps other text).
* ``save_plot`` — writes ``bench/out/<name>.png`` with the Agg backend.
* ``dataset_vectors`` — MiniLM vectors of the committed dataset texts, computed once and
  kept in ``bench/out/`` (ignored by git) so reruns and the large fillers do not re-embed.
* ``bulk_fill`` — COPY (binary) with precomputed vectors, then the HNSW and GIN indexes
  built once, each build timed (``BUILD_MEMORY`` of maintenance_work_mem, one parallel
  maintenance worker: the reference machine has 2 cores).
* ``ServerMemory`` — peak memory of the PostgreSQL server's processes, sampled in a
  thread; ``bench_peak_rss_mb`` — the bench process's own peak; ``relation_sizes``.
* Bench-only SQL lives in ``bench/queries.sql`` as named blocks, like the library's.
* ``add_baseline_arguments`` / ``baseline_tree`` / ``run_baseline`` — the baseline from an
  older revision: ``--baseline-src DIR`` (an older checkout's source tree) or
  ``--baseline-rev REV`` (``git archive REV`` of this repository into a temporary
  directory); a bench either reads that tree (its recall statement, its servers on
  ``PYTHONPATH``) or runs its own entry point from it (``python -m bench.X`` with the tree
  first on the import path: that revision's bench on that revision's code). Older
  statements are not kept here: they are in git.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import platform
import resource
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from stash_pipeline.db.sql import parse

HERE = Path(__file__).parent
ROOT = HERE.parent
OUT = HERE / "out"
RESULTS = HERE / "results"
QUERIES = parse((HERE / "queries.sql").read_text(encoding="utf-8"), "bench/queries.sql")


def sql(name: str) -> str:
    """A bench-only named query from bench/queries.sql."""
    return QUERIES[name]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _with_db(dsn: str, dbname: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    parts = conninfo_to_dict(dsn)
    parts["dbname"] = dbname
    return make_conninfo(**parts)


@contextlib.contextmanager
def fresh_store(embedder: str = "minilm", *, keep: str | None = None, server_url: str | None = None,
                **overrides: Any) -> Iterator[Any]:
    """A Store on a new migrated database (dropped / server stopped on exit).

    The server is ``server_url`` when given ("" for an embedded one whatever the
    environment says), else ``STASH_DATABASE_URL``'s, else an embedded one.

    ``keep`` names a database on ``STASH_DATABASE_URL``'s server that is created when
    missing, migrated, and kept afterwards: a 1M fill (an hour on 2 cores) is then paid
    once and later runs measure the current code on it.
    """
    import psycopg
    import psycopg.sql

    from stash_pipeline.config import load_settings
    from stash_pipeline.db.embedded import EmbeddedServer
    from stash_pipeline.db.migrate import migrate
    from stash_pipeline.store import Store

    home = Path(tempfile.mkdtemp(prefix="stash-bench-"))
    server: EmbeddedServer | None = None
    external = os.environ.get("STASH_DATABASE_URL") if server_url is None else server_url
    try:
        if external:
            admin = _with_db(external, "postgres")
        else:
            server = EmbeddedServer(load_settings(home=home, db_port=_free_port(), embedder="hash"))
            server.start()
            admin = server.url("postgres")
        if keep is not None and not external:
            raise SystemExit("--keep needs STASH_DATABASE_URL (a server that outlives the run)")
        name = keep or f"stash_bench_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(admin, autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
            if not exists:
                conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(psycopg.sql.Identifier(name)))
        dsn = _with_db(admin, name)
        settings = load_settings(database_url=dsn, home=home, embedder=embedder, **({"vector_dim": 384} | overrides))
        migrate(settings, dsn)
        store = Store.open(settings)
        try:
            yield store
        finally:
            store.close()
            if keep is None:
                with psycopg.connect(admin, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(home, ignore_errors=True)


# --- timing -------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100), linear interpolation."""
    return float(np.percentile(np.asarray(values, dtype=float), q))


def summarize(ms: Sequence[float]) -> dict[str, float]:
    return {"n": len(ms), "p50": percentile(ms, 50), "p95": percentile(ms, 95), "mean": statistics.fmean(ms)}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(milliseconds, result) of one call."""
    start = time.perf_counter()
    result = fn()
    return (time.perf_counter() - start) * 1000.0, result


def ratio(ours: float, baseline: float) -> str:
    """ours / baseline, formatted (lower is better for times, higher for quality)."""
    if baseline == 0:
        return "n/a"
    return f"{ours / baseline:.2f}x"


# --- output -------------------------------------------------------------------------------


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Print (and return) a Markdown table."""

    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
        return str(value)

    lines = [f"**{title}**", "", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    text = "\n".join(lines)
    record(text)
    return text


# --- results files ------------------------------------------------------------------------

#: the tables (and recorded text) of the run ``writes_results`` is recording; None: none is
_recorded: list[str] | None = None
#: ``BENCH_RESULTS=off`` in the environment: print only (an older tree's baseline run, a trial)
RESULTS_SWITCH = "BENCH_RESULTS"


def record(text: str) -> None:
    """Print ``text`` (Markdown) and keep it for the results file of the run being recorded."""
    print(text + "\n", flush=True)
    if _recorded is not None:
        _recorded.append(text)


def _program() -> tuple[str, str]:
    """(the results file's stem, the command line) of this process: ``python -m bench.X …``
    or ``python bench/X.py …``."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    args = shlex.join(sys.argv[1:])
    if spec is not None and spec.name.startswith("bench."):
        return spec.name.removeprefix("bench."), f"python -m {spec.name} {args}".rstrip()
    script = Path(sys.argv[0]).resolve()
    shown = script.relative_to(ROOT) if script.is_relative_to(ROOT) else script
    return script.stem, f"python {shown} {args}".rstrip()


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def code_state() -> str:
    """The checkout's commit, and which tracked files differ from it ("3d15bf5 with
    uncommitted changes to bench/common.py"): what a run imports is what it measures."""
    commit = _git("rev-parse", "--short", "HEAD") or "unknown"
    changed = _git("diff", "--name-only", "HEAD").splitlines()
    if not changed:
        return commit
    shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    return f"{commit} with uncommitted changes to {shown}"


def _section(command: str, started: float, load: float, tables: Sequence[str], code: str) -> str:
    """The results section of a run that began at ``started`` on the code ``code_state``
    gave then (and says so if the checkout moved while it ran)."""
    commit, now = code, code_state()
    if now != code:
        commit += f" at the start ({now} at the end)"
    when = time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)) + time.strftime("–%H:%M UTC", time.gmtime())
    machine = (f"{os.cpu_count()} cores, load average {load:.1f} at the start and {os.getloadavg()[0]:.1f} at "
               f"the end; {platform.system()} {platform.machine()}, Python {platform.python_version()}")
    head = f"## `{command}`\n\n{when}; commit {commit}; {machine}.\n\n"
    return head + "\n\n".join(tables) + "\n"


def write_results(stem: str, command: str, section: str) -> Path:
    """Put ``section`` at the top of ``bench/results/<stem>.md``, replacing the section of the
    same command line; the other sections (other arguments, the figures recorded by hand) stay."""
    path = RESULTS / f"{stem}.md"
    preamble = (f"# `bench.{stem}`: results\n\nWritten by the bench itself (`bench/common.py`, "
                "`writes_results`): one section per command line, the latest run first. A run replaces "
                "the section of its own command line; older runs are in this file's git history.\n")
    sections: list[str] = []
    if path.exists():
        text = path.read_text(encoding="utf-8")
        preamble, *rest = text.split("\n## ")
        sections = ["## " + part for part in rest]
    heading = f"## `{command}`\n"
    kept = [s for s in sections if not s.startswith(heading)]
    RESULTS.mkdir(exist_ok=True)
    path.write_text("\n".join([preamble.rstrip() + "\n", section, *(s.rstrip() + "\n" for s in kept)]),
                    encoding="utf-8")
    return path


def writes_results(main: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a bench's ``main``: when the bench is the program (``python -m bench.X`` or
    ``python bench/X.py``, not an import by a test or another bench) and it returns normally,
    the tables it printed are written to ``bench/results/X.md`` under its command line, with
    the date, the commit and the machine's load. ``BENCH_RESULTS=off`` prints only."""

    @functools.wraps(main)
    def run(*args: Any, **kwargs: Any) -> Any:
        global _recorded
        if main.__module__ != "__main__" or os.environ.get(RESULTS_SWITCH) == "off" or _recorded is not None:
            return main(*args, **kwargs)
        started, load, code = time.time(), os.getloadavg()[0], code_state()
        _recorded = []
        try:
            result = main(*args, **kwargs)
            tables = _recorded
        finally:
            _recorded = None
        if tables and not (isinstance(result, int) and not isinstance(result, bool) and result):
            stem, command = _program()
            path = write_results(stem, command, _section(command, started, load, tables, code))
            print(f"results: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}", flush=True)
        return result

    return run


def save_plot(name: str, draw: Callable[[Any], None], *, size: tuple[float, float] = (8, 4.5)) -> Path:
    """Draw with ``draw(ax)`` on a fresh figure and write bench/out/<name>.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    OUT.mkdir(exist_ok=True)
    fig, ax = plt.subplots(figsize=size)
    draw(ax)
    fig.tight_layout()
    path = OUT / f"{name}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"plot: {path.relative_to(HERE.parent)}")
    return path


def save_paired_bars(
    name: str, title: str, labels: Sequence[str], ours: Sequence[float], baseline: Sequence[float],
    *, ours_label: str, baseline_label: str, ylabel: str = "ms",
) -> Path:
    """Ours next to the baseline for each label: the plot every latency benchmark draws."""

    def draw(ax: Any) -> None:
        x = np.arange(len(labels))
        ax.bar(x - 0.2, list(ours), 0.4, label=ours_label)
        ax.bar(x + 0.2, list(baseline), 0.4, label=baseline_label)
        ax.set_xticks(x, list(labels))
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=8)

    return save_plot(name, draw)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def stop_process(process: subprocess.Popen[bytes], timeout: float) -> None:
    """Ask a server the bench started to stop; kill it if it has not within ``timeout`` s."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# --- dataset vectors ----------------------------------------------------------------------


#: the embedder ``dataset_vectors`` uses when none is given (None = the numpy MiniLM);
#: ``bench/embedders.py`` swaps it to score each candidate with the same machinery
_dataset_embedder: list[Any] = [None]


@contextlib.contextmanager
def dataset_embedder(embedder: Any) -> Iterator[None]:
    """Within the block, ``dataset_vectors`` embeds with ``embedder`` (cached under its name)."""
    _dataset_embedder.append(embedder)
    try:
        yield
    finally:
        _dataset_embedder.pop()


def dataset_vectors(texts: Sequence[str], model: str | None = None) -> np.ndarray:
    """Vectors for ``texts`` (rows in order), cached on disk in bench/out/ by text hash.

    The embedder is MiniLM unless a ``dataset_embedder`` block chose another one.
    """
    from stash_pipeline.embedding.cache import text_hash
    from stash_pipeline.embedding.minilm import MiniLMEmbedder

    chosen = _dataset_embedder[-1]
    model = model or (chosen.name if chosen is not None else "all-MiniLM-L6-v2")
    OUT.mkdir(exist_ok=True)
    path = OUT / f"vectors-{model}.npz"
    cache: dict[str, np.ndarray] = {}
    if path.exists():
        with np.load(path) as stored:
            cache = dict(zip(stored["hashes"].tolist(), stored["vectors"], strict=True))
    hashes = [text_hash(t) for t in texts]
    missing = sorted({h: t for h, t in zip(hashes, texts, strict=True) if h not in cache}.items())
    if missing:
        log(f"embedding {len(missing)} texts with {model} (cached in {path.name} for the next run)")
        embedder = chosen if chosen is not None else MiniLMEmbedder()
        for start in range(0, len(missing), 256):
            chunk = missing[start : start + 256]
            for (h, _), vector in zip(chunk, embedder.embed([t for _, t in chunk]), strict=True):
                cache[h] = np.asarray(vector, dtype=np.float32)
        keys = sorted(cache)
        np.savez(path, hashes=np.array(keys), vectors=np.stack([cache[k] for k in keys]))
    return np.stack([cache[h] for h in hashes])


def prime_embedding_cache(store: Any, texts: Sequence[str], vectors: np.ndarray) -> None:
    """Put known vectors into the store's embedding cache, so embedding them is a cache hit.

    Recall caches a query's vector per scope (``embedding.cache.query_key``): a recall of a
    primed text still runs the model once per scope it is asked in.
    """
    from stash_pipeline.embedding.cache import text_hash

    embedder = store.embedder
    embedder.check_lock()
    rows = [
        {"text_hash": text_hash(t), "model": embedder.name, "endpoint": embedder.endpoint, "embedding": v}
        for t, v in zip(texts, vectors, strict=True)
    ]
    with store.db.transaction() as tx:
        tx.executemany("embedding_cache_insert", rows)


def noisy_copies(base: np.ndarray, count: int, rng: np.random.Generator, noise: float = 0.25) -> np.ndarray:
    """``count`` unit vectors near random rows of ``base`` (keeps the real embedding geometry)."""
    picks = base[rng.integers(0, len(base), size=count)]
    out = picks + rng.normal(0.0, noise / np.sqrt(base.shape[1]), size=picks.shape).astype(np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out.astype(np.float32)


#: maintenance_work_mem for the index builds after a bulk fill: an HNSW graph that does
#: not fit is built far more slowly (1M x 384 dims needs about 2 GB; the machine has 24 GiB)
BUILD_MEMORY = "4GB"
#: parallel workers for those builds (the leader works too: 2 processes on 2 cores)
BUILD_WORKERS = 1


def bulk_fill(
    store: Any,
    table: str,
    namespace_id: int,
    chunks: Iterable[tuple[Sequence[str], np.ndarray]],
    builds: dict[str, float] | None = None,
) -> float:
    """COPY rows into ``episodes`` or ``facts`` with precomputed vectors; returns seconds.

    ``chunks`` yields (contents, vectors) pairs, so 1M vectors need not sit in memory at
    once. The COPY is binary (vectors go as float4 arrays, not 384 formatted decimals per
    row). The HNSW and GIN indexes are dropped first and rebuilt after the last chunk (much
    faster than incremental inserts), from their own stored definitions; ``builds``, when
    given, receives each index's build seconds (and ``"<table> copy"``).
    """
    assert table in ("episodes", "facts")
    start = time.perf_counter()
    model = store.settings.embedding_model_name
    extra = ["asserted"] if table == "facts" else []
    columns = "namespace_id, content, embedding, embedding_model" + (", origin" if extra else "")
    types = ["int8", "text", "vector", "text"] + (["text"] if extra else [])
    with store.db.connection() as conn:
        rows = conn.execute(sql("bench_search_indexes"), {"table": table}).fetchall()
        for r in rows:
            conn.execute(f'DROP INDEX "{r["indexname"]}"')  # names read from pg_indexes
        conn.commit()
        for contents, vectors in chunks:
            with conn.cursor() as cur, cur.copy(f"COPY {table} ({columns}) FROM STDIN WITH (FORMAT BINARY)") as copy:
                copy.set_types(types)
                for content, vector in zip(contents, vectors, strict=True):
                    copy.write_row([namespace_id, content, vector, model, *extra])
            conn.commit()
        if builds is not None:
            builds[f"{table} copy"] = time.perf_counter() - start
        conn.execute(f"SET maintenance_work_mem = '{BUILD_MEMORY}'")  # module constants
        conn.execute(f"SET max_parallel_maintenance_workers = {BUILD_WORKERS}")
        for r in rows:
            began = time.perf_counter()
            conn.execute(r["indexdef"])
            conn.commit()
            if builds is not None:
                builds[r["indexname"]] = time.perf_counter() - began
        conn.execute(f"ANALYZE {table}")
        conn.commit()
    return time.perf_counter() - start


# --- memory and sizes ---------------------------------------------------------------------


def server_cpu_ms(conn: Any) -> float | None:
    """CPU time the connection's server process has used so far, ms (None: not a local server).

    On a machine shared with other work, wall time includes waiting for a core; the
    difference of this before and after a statement is the work the statement itself cost
    the server, which is what an idle machine's latency is made of.
    """
    try:
        return int(Path(f"/proc/{conn.info.backend_pid}/schedstat").read_text().split()[0]) / 1e6
    except (OSError, ValueError, IndexError):
        return None


def bench_peak_rss_mb() -> float:
    """Peak resident memory of this (bench) process so far, MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class ServerMemory:
    """Peak memory of the PostgreSQL server (postmaster and every child), sampled in a thread.

    ``peak_pss_mb`` is the peak of the summed proportional set size (shared buffers and a
    parallel build's shared graph counted once), ``peak_process_rss_mb`` the largest
    resident size of one process (an index build's backend, a query's backend). Only for a
    server on this machine that this user may inspect; otherwise both stay 0.
    """

    def __init__(self, store: Any, interval: float = 0.5) -> None:
        import psutil

        self.interval = interval
        self.peak_pss_mb = 0.0
        self.peak_process_rss_mb = 0.0
        self._stop = threading.Event()
        self._postmaster: Any = None
        try:
            with store.db.transaction() as tx:
                backend = tx.conn.info.backend_pid
            self._postmaster = psutil.Process(int(backend)).parent()
        except (psutil.Error, OSError):
            self._postmaster = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ServerMemory:
        if self._postmaster is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        import psutil

        while not self._stop.wait(self.interval):
            pss = 0.0
            try:
                processes = [self._postmaster, *self._postmaster.children(recursive=True)]
            except psutil.Error:
                return
            for process in processes:
                try:
                    info = process.memory_full_info()
                except psutil.Error:
                    continue  # a backend that ended between listing and reading
                pss += info.pss
                self.peak_process_rss_mb = max(self.peak_process_rss_mb, info.rss / 2**20)
            self.peak_pss_mb = max(self.peak_pss_mb, pss / 2**20)


def relation_sizes(store: Any) -> list[list[Any]]:
    """[name, MB] of the episodes and facts tables (with TOAST) and each of their indexes."""
    with store.db.transaction() as tx:
        return [[r["name"], r["bytes"] / 2**20] for r in tx.conn.execute(sql("bench_relation_sizes")).fetchall()]


# --- the baseline from an older revision ---------------------------------------------------

BASELINE_FLAGS = ("--baseline-src", "--baseline-rev")


def add_baseline_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """``--baseline-src DIR`` or ``--baseline-rev REV`` (not both); ``what`` says what the bench does with the tree."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--baseline-src", type=Path, metavar="DIR",
                       help=f"an older checkout's source tree (git archive REV | tar -x -C DIR): {what}")
    group.add_argument("--baseline-rev", metavar="REV",
                       help="the same with git revision REV of this repository (git archive into a temporary directory)")


def export_revision(rev: str, into: Path) -> str:
    """``git archive`` of ``rev`` extracted into ``into``; returns the short commit id."""
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--short", f"{rev}^{{commit}}"],
                                capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(f"--baseline-rev {rev}: not a revision of {ROOT} ({exc})") from exc
    with subprocess.Popen(["git", "-C", str(ROOT), "archive", "--format=tar", commit], stdout=subprocess.PIPE) as git:
        assert git.stdout is not None
        with tarfile.open(fileobj=git.stdout, mode="r|") as archive:
            # this repository's own archive; the "data" filter where the Python has it
            archive.extractall(into, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    if git.returncode:
        raise SystemExit(f"git archive {commit} failed ({git.returncode})")
    return commit


@contextlib.contextmanager
def baseline_tree(args: argparse.Namespace) -> Iterator[Path | None]:
    """The older source tree ``add_baseline_arguments`` asked for (None: no baseline).

    ``--baseline-src`` as given; ``--baseline-rev`` exported into a temporary directory,
    removed on exit. ``args.baseline_label`` is set to the revision (or the directory).
    """
    src, rev = getattr(args, "baseline_src", None), getattr(args, "baseline_rev", None)
    if src is not None:
        src = src.resolve()
        if not (src / "stash_pipeline").is_dir():
            raise SystemExit(f"--baseline-src {src}: no stash_pipeline/ in it (an older checkout's root)")
        args.baseline_label = str(src)
        yield src
    elif rev:
        with tempfile.TemporaryDirectory(prefix="stash-baseline-") as tmp:
            args.baseline_label = export_revision(rev, Path(tmp))
            log(f"baseline: {rev} ({args.baseline_label}) in {tmp}")
            yield Path(tmp)
    else:
        args.baseline_label = None
        yield None


def recall_statements(tree: Path) -> dict[str, str]:
    """Another checkout's recall statements by name: its recall package's queries
    (``stash_pipeline/recall/queries/*.sql``), or ``db/queries/recall.sql`` before the package.
    They run on this tree's schema, whose migrations hold the functions either calls."""
    from stash_pipeline.db import sql

    package = tree / "stash_pipeline" / "recall" / "queries"
    before_package = tree / "stash_pipeline" / "db" / "queries" / "recall.sql"
    files = sorted(package.glob("*.sql")) if package.is_dir() else [before_package]
    statements: dict[str, str] = {}
    for file in files:
        statements |= sql.parse(file.read_text(encoding="utf-8"), str(file))
    return statements


def baseline_argv(argv: Sequence[str] | None) -> list[str]:
    """The bench's own arguments (``sys.argv[1:]`` when None) without the baseline flags."""
    out: list[str] = []
    items = list(sys.argv[1:] if argv is None else argv)
    skip = False
    for item in items:
        if skip:
            skip = False
        elif item in BASELINE_FLAGS:
            skip = True
        elif not item.startswith(tuple(f"{flag}=" for flag in BASELINE_FLAGS)):
            out.append(item)
    return out


#: what a bench that reruns itself from the older tree says of ``--baseline-src``
RERUN = "after this run, the same run (same arguments) from that tree"


def measure_then_baseline(args: argparse.Namespace, argv: Sequence[str] | None, module: str,
                          measure: Callable[[], None]) -> None:
    """``measure()``, then with a baseline tree (``add_baseline_arguments(parser, RERUN)``)
    ``module`` again from that tree with the same arguments. The tree is exported first, so a
    wrong REV fails before the run."""
    with baseline_tree(args) as tree:
        measure()
        if tree is not None:
            run_baseline(tree, module, baseline_argv(argv), args.baseline_label)


def run_baseline(tree: Path, module: str, argv: Sequence[str], label: str | None = None) -> None:
    """``python -m module argv`` from the older tree: that revision's bench on that
    revision's code (the tree first on the import path, run in it), output streamed here.

    The dataset-vector caches of ``bench/out/`` (not in git) that the tree lacks are copied
    into it first, so the older run does not re-embed the dataset.
    """
    script = tree / (module.replace(".", "/") + ".py")
    if not script.is_file():
        raise SystemExit(f"the baseline tree ({label or tree}) has no {script.relative_to(tree)}: "
                         f"pick a revision that has it (git log --diff-filter=A -- {script.relative_to(tree)})")
    for cached in OUT.glob("vectors-*.npz"):
        target = tree / "bench" / "out" / cached.name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(cached, target)
    command = [sys.executable, "-m", module, *argv]
    title = f"Baseline: {label or tree} — python -m {module} {' '.join(argv)}"
    print(f"\n## {title}\n", flush=True)
    # the older tree's bench prints only; its tables go into this run's results file
    env = {**os.environ, RESULTS_SWITCH: "off",
           "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    if _recorded is None:
        result = subprocess.run(command, cwd=tree, env=env, check=False)
    else:
        _recorded.append(f"### {title}")
        with subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.PIPE, text=True) as child:
            assert child.stdout is not None
            block: list[str] = []
            for line in child.stdout:
                print(line, end="", flush=True)
                if line.startswith(("**", "|")):
                    block.append(line.rstrip("\n"))
                elif block and line.strip() == "":
                    _recorded.append("\n".join(block))
                    block = []
            if block:
                _recorded.append("\n".join(block))
        result = child
    if result.returncode:
        raise SystemExit(f"the baseline run ({label or tree}) failed with exit code {result.returncode}")
