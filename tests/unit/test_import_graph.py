"""The project's modules import each other without circles.

Reads every module of ``stash_pipeline`` and ``stash_serve`` with ``ast`` (nothing is
imported or run), draws an edge A → B for each import of B by A — module level and
inside functions and ``if TYPE_CHECKING:`` blocks alike (a type-only import is still a
dependency of the design) — and fails on any strongly connected component of more than
one module. ``from stash_pipeline.memory import episodes`` is an edge to the module
``stash_pipeline.memory.episodes``, not to the package face; ``from stash_pipeline.db
import Database`` is an edge to the package ``stash_pipeline.db``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("stash_pipeline", "stash_serve")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue  # Alembic loads these by path, never by import
            found[_module_name(path)] = path
    return found


def _imports(tree: ast.AST, module: str, is_package: bool, modules: set[str]) -> set[str]:
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                # a submodule when one exists by that name, else a name from the module itself
                names.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = _imports(ast.parse(path.read_text()), name, path.name == "__init__.py", set(modules))
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def test_the_graph_sees_the_project() -> None:
    graph = import_graph()
    assert "stash_pipeline.recall.pipeline" in graph
    assert "stash_pipeline.store" in graph["stash_pipeline.recall.pipeline"]


def test_circle_detection_finds_a_loop() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circles() -> None:
    found = circles(import_graph())
    assert not found, "import circles:\n" + "\n".join(" ↔ ".join(c) for c in found)



#: The layers, lowest first. A module may import modules of its own entry and of the layers
#: below; the entries side by side in one layer are independent of each other. A module
#: belongs to its longest matching entry (``stash_pipeline`` and ``stash_serve`` name only
#: the package faces), and every module has one, so a new package or top-level module is
#: placed here on purpose.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("stash_pipeline", "stash_pipeline.errors", "stash_pipeline.models"),
    ("stash_pipeline.config",),
    ("stash_pipeline.db",),
    ("stash_pipeline.embedding",),
    ("stash_pipeline.store",),
    ("stash_pipeline.memory",),
    ("stash_pipeline.recall", "stash_pipeline.interchange", "stash_pipeline.auth", "stash_pipeline.stages"),
    ("stash_pipeline.consolidation",),
    ("stash_pipeline.operations",),
    (
        "stash_pipeline.defs",
        "stash_serve",
        "stash_serve.metrics",
        "stash_serve.limits",
        "stash_serve.http_edge",
        "stash_serve.stdio",
        "stash_serve.token_check",
        "stash_serve.warmup",
        "stash_serve.runs",
        "stash_serve.run_worker",
        "stash_serve.up",
    ),
    ("stash_serve.admission", "stash_serve.workers", "stash_serve.mcp"),
    ("stash_serve.console",),
    ("stash_serve.http",),
    ("stash_serve.serve", "stash_serve.dagster_ui"),
    ("stash_serve.cli",),
)


def entry_of(module: str) -> str | None:
    """The entry of LAYERS a module belongs to: itself, else its longest dotted prefix."""
    found = [
        entry
        for layer in LAYERS
        for entry in layer
        if module == entry or (module.startswith(entry + ".") and entry not in PACKAGES)
    ]
    return max(found, key=len, default=None)


def upward_edges(graph: dict[str, set[str]]) -> list[str]:
    """Each import that leaves its entry for a layer above, or for another entry of its own layer."""
    level = {entry: n for n, layer in enumerate(LAYERS) for entry in layer}
    found: list[str] = []
    for module in sorted(graph):
        source = entry_of(module)
        for target in sorted(graph[module]):
            into = entry_of(target)
            if source is None or into is None or into == source:
                continue
            if level[into] >= level[source]:
                side = "beside" if level[into] == level[source] else "above"
                found.append(f"{module} → {target} ({into} is {side} {source})")
    return found


def test_layers_name_each_entry_once() -> None:
    entries = [entry for layer in LAYERS for entry in layer]
    assert len(entries) == len(set(entries))


def test_every_module_sits_in_a_layer() -> None:
    unplaced = sorted(module for module in import_graph() if entry_of(module) is None)
    assert not unplaced, "modules in no layer (add them to LAYERS):\n" + "\n".join(unplaced)


def test_layer_check_finds_an_upward_import() -> None:
    graph = {
        "stash_pipeline.db.gateway": {"stash_pipeline.memory.scope", "stash_pipeline.config"},
        "stash_pipeline.recall.shape": {"stash_pipeline.stages.common", "stash_pipeline.recall.request"},
    }
    assert upward_edges(graph) == [
        "stash_pipeline.db.gateway → stash_pipeline.memory.scope"
        " (stash_pipeline.memory is above stash_pipeline.db)",
        "stash_pipeline.recall.shape → stash_pipeline.stages.common"
        " (stash_pipeline.stages is beside stash_pipeline.recall)",
    ]


def test_no_import_goes_up_a_layer() -> None:
    found = upward_edges(import_graph())
    assert not found, "imports against the layers:\n" + "\n".join(found)
