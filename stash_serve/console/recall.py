"""The recall playground: what an agent gets for a question, and why each row ranks.

``/recall?q=&ns=&limit=&as_of=&known_at=&include_history=&context=`` runs the ``recall``
operation exactly as an agent with the viewer's token would (the same arguments, rights
and scope), with ``include_score_parts`` on, and shows two things side by side:

* the answer as the agent reads it: the JSON, its size in characters (the compact text
  the MCP tool sends) and an estimate of its tokens (characters ÷ 4, the rule
  ``max_tokens`` counts by);
* why: per result its rank, kind, score and score parts, the legs that found it (vector:
  a cosine; text: a BM25 above 0; entity: the entity leg's score; context: a lift from a
  neighbouring hit), what was grouped into it (source turns, folded candidates, context
  turns), and a bar chart of each score split into its parts.

The bar splits a score by recall's hybrid rule (``recall/queries/recall.sql``): vector =
w_vector × cosine, text = (1 − w_vector) × coverage (the query's weight: the one of the
shipped weights that gives back its results' own scores), plus the context lift; what
remains (the entity leg's score, a group's best member, a penalty for a superseded or
stale row) is "other", and a mark shows the score itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from stash_pipeline import errors
from stash_pipeline.memory import validate
from stash_pipeline.recall.config import DEFAULT
from stash_serve.console.app import STATUS, Viewer, page, render
from stash_serve.mcp.calls import to_json

#: the most results the playground asks for (a page of the console)
LIMIT_MAX = 50
#: the parts of a score, in the order the page lists them, with what each means
PARTS = {
    "vector": "cosine similarity of the query's vector and the row's",
    "text": "BM25 of the query's words in the row",
    "coverage": "BM25 over the best BM25 the query's words could reach",
    "context": "lift from a strong hit of the same session beside it",
    "entity": "the entity leg's score: the query names the fact's subject (or its neighbour)",
    "weight": "the weight a fact ranked by (facts state plainly what turns say)",
    "own": "the result's own score, when a better-scored member of its group gives the score",
    "diversity": "penalty for sessions already shown",
}
#: the bar chart's segments and their colours
SEGMENTS = {"vector": "#2357c6", "text": "#1b7f3b", "context": "#d07a00", "other": "#8a55c2"}


@dataclass
class Why:
    """One result explained: its rank, the parts of its score and what it groups."""

    rank: int
    item: dict[str, Any]
    parts: dict[str, float]
    legs: list[str]
    segments: dict[str, float] = field(default_factory=dict)

    @property
    def href(self) -> str:
        return f"/{'facts' if self.item.get('kind') == 'fact' else 'episodes'}/{self.item.get('id')}"


def legs(parts: dict[str, float]) -> list[str]:
    """The legs that found a result, from its score parts."""
    found = []
    if "vector" in parts:
        found.append("vector")
    if parts.get("text", 0) > 0:
        found.append("text")
    if "entity" in parts:
        found.append("entity")
    if "context" in parts:
        found.append("context")
    return found


def segments(score: float, parts: dict[str, float], w_vector: float) -> dict[str, float]:
    """A score split into the hybrid rule's parts; ``other`` is what they leave (may be < 0)."""
    vector = w_vector * max(parts.get("vector", 0.0), 0.0)
    text = (1 - w_vector) * min(max(parts.get("coverage", 0.0), 0.0), 1.0)
    context = max(parts.get("context", 0.0), 0.0)
    return {"vector": vector, "text": text, "context": context, "other": score - vector - text - context}


def query_weight(results: list[dict[str, Any]]) -> float:
    """The cosine's weight this query ranked by: one per query (the shipped ``w_vector``,
    ``w_vector_masked`` when the query named a name too common to search by, 1 or 0 in the
    vector or text mode), the one that best gives back the results' own scores."""
    candidates = (DEFAULT.w_vector, DEFAULT.w_vector_masked, 1.0, 0.0)

    def error(w: float) -> float:
        total = 0.0
        for item in results:
            parts = item.get("score_parts") or {}
            own = parts.get("own", float(item.get("score", 0.0)) - (parts.get("context") or 0.0))
            hybrid = w * max(parts.get("vector") or 0.0, 0.0) + (1 - w) * min(max(parts.get("coverage") or 0.0, 0.0), 1.0)
            total += abs(own - hybrid)
        return total

    return min(candidates, key=error)


def explain(results: list[dict[str, Any]]) -> tuple[list[Why], float]:
    """Each result explained, and the cosine's weight the query ranked by."""
    w_vector = query_weight(results)
    out = []
    for rank, item in enumerate(results, 1):
        parts = {k: float(v) for k, v in (item.get("score_parts") or {}).items() if v is not None}
        out.append(Why(rank=rank, item=item, parts=parts, legs=legs(parts),
                       segments=segments(float(item.get("score", 0.0)), parts, w_vector)))
    return out, w_vector


def chart(whys: list[Why]) -> Markup:
    """Each result's score as a stacked horizontal bar of its parts, a tick at the score."""
    if not whys:
        return Markup("")
    row, left, width = 22, 110, 420
    top = max([1.0] + [sum(max(v, 0.0) for v in w.segments.values()) for w in whys]
              + [float(w.item.get("score", 0.0)) for w in whys])
    height = row * len(whys) + 40
    scale = width / top
    out = [f'<svg class="bars" viewBox="0 0 {left + width + 60} {height}" width="{left + width + 60}" '
           f'height="{height}" role="img" aria-label="Score parts per result" xmlns="http://www.w3.org/2000/svg">']
    for i, why in enumerate(whys):
        y = 6 + i * row
        label = f"#{why.rank} {why.item.get('kind', '')} {why.item.get('id', '')}"
        out.append(f'<text x="0" y="{y + 13}" fill="#1d2430">{escape(label)}</text>')
        x = float(left)
        for name, value in why.segments.items():
            if value <= 0:
                continue
            w = value * scale
            out.append(f'<rect class="part-{name}" x="{x:.1f}" y="{y}" width="{w:.1f}" height="16" '
                       f'fill="{SEGMENTS[name]}"><title>{name}: {value:.4f}</title></rect>')
            x += w
        score = float(why.item.get("score", 0.0))
        sx = left + max(score, 0.0) * scale
        out.append(f'<line x1="{sx:.1f}" y1="{y - 2}" x2="{sx:.1f}" y2="{y + 18}" stroke="#1d2430" '
                   f'stroke-width="2"><title>score {score:.4f}</title></line>')
        out.append(f'<text x="{left + width + 6}" y="{y + 13}" fill="#1d2430">{score:.3f}</text>')
    ly = height - 14
    x = float(left)
    for name, colour in SEGMENTS.items():
        out.append(f'<rect x="{x:.0f}" y="{ly - 10}" width="12" height="12" fill="{colour}"/>'
                   f'<text x="{x + 16:.0f}" y="{ly}" fill="#1d2430">{name}</text>')
        x += 90
    out.append("</svg>")
    return Markup("".join(out))


def _int(value: str | None, default: int, low: int, high: int) -> int:
    try:
        return min(max(int(value or default), low), high)
    except ValueError:
        return default


@page
async def playground(request: Request, viewer: Viewer) -> Response:
    params = request.query_params
    form = {
        "q": (params.get("q") or "").strip(),
        "ns": (params.get("ns") or "").strip(),
        "limit": _int(params.get("limit"), validate.RECALL_LIMIT_DEFAULT, 1, LIMIT_MAX),
        "as_of": (params.get("as_of") or "").strip(),
        "known_at": (params.get("known_at") or "").strip(),
        "include_history": params.get("include_history") in ("1", "on", "true"),
        "context": _int(params.get("context"), validate.RECALL_CONTEXT_DEFAULT, 0, validate.RECALL_CONTEXT_MAX),
    }
    context: dict[str, Any] = {"form": form, "trees": viewer.trees(), "answer": None, "error": None,
                               "limits": {"limit": LIMIT_MAX, "context": validate.RECALL_CONTEXT_MAX},
                               "parts": PARTS}
    status = 200
    if form["q"]:
        try:
            answer = await viewer.op(
                "recall", query=form["q"], namespaces=[form["ns"]] if form["ns"] else None, limit=form["limit"],
                as_of=form["as_of"] or None, known_at=form["known_at"] or None,
                include_history=form["include_history"], context=form["context"], include_score_parts=True,
            )
        except errors.StashError as exc:
            context["error"] = exc.message
            status = STATUS.get(exc.code, 400)
        else:
            answer = to_json(answer)  # the JSON values and text the MCP tool sends
            wire = json.dumps(answer, ensure_ascii=False, separators=(",", ":"))
            whys, w_vector = explain(answer.get("results", []))
            context.update(
                answer=answer, pretty=json.dumps(answer, ensure_ascii=False, indent=2),
                characters=len(wire), tokens=max(1, (len(wire) + 3) // 4), whys=whys, bars=chart(whys),
                pending=answer.get("pending"), w_vector=w_vector,
                masked=w_vector == DEFAULT.w_vector_masked != DEFAULT.w_vector,
            )
    return render(request, "recall.html", status_code=status, title="Recall playground", **context)


ROUTES = [Route("/recall", playground, methods=["GET"])]
