"""The graph around an entity as an SVG picture, drawn on the server.

The entity sits in the centre, its neighbours (one hop) on a ring around it, theirs (two
hops) on an outer ring near the neighbour that reached them. Each relationship is an
arrow from its ``from`` end to its ``to`` end labelled with its relation type (several
between the same two entities share one arrow, their types joined; two opposite arrows
bend apart; a crowded picture names its commonest type once, in a caption, and staggers
its ring). Every node links to its own entity page. The picture is cut to what is drawn.
All text is escaped here: the picture is inserted into the page as markup.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

from markupsafe import Markup, escape

from stash_pipeline.models import GraphEdge, GraphNode, Neighbourhood
from stash_serve.console.app import url

WIDTH, HEIGHT = 820, 500
CX, CY = WIDTH / 2, HEIGHT / 2
#: the rings' radii across and down (wider than tall: pages are)
RINGS = {1: (190.0, 125.0), 2: (330.0, 205.0)}
RADIUS = {0: 26.0, 1: 18.0, 2: 13.0}
FILL = {0: "#2357c6", 1: "#6d8fd8", 2: "#b7c7ea"}
LABEL_CHARS = 22
#: more neighbours than this and their ring staggers
CROWDED = 10


def _label(text: str, length: int = LABEL_CHARS) -> str:
    return text if len(text) <= length else text[: length - 1] + "…"


def _on_ring(hop: int, angle: float, scale: float = 1.0) -> tuple[float, float]:
    rx, ry = RINGS[hop]
    return CX + scale * rx * math.cos(angle), CY + scale * ry * math.sin(angle)


def layout(hood: Neighbourhood) -> dict[int, tuple[float, float]]:
    """Each node's position: the centre in the middle, rings by hop, a second-hop node
    near the first-hop node it hangs from."""
    by_hop: dict[int, list[GraphNode]] = defaultdict(list)
    for node in hood.nodes:
        by_hop[node.hop].append(node)
    place: dict[int, tuple[float, float]] = {hood.centre: (CX, CY)}
    angle: dict[int, float] = {}
    first = sorted(by_hop[1], key=lambda n: n.id)
    for i, node in enumerate(first):
        a = math.pi + 2 * math.pi * i / max(1, len(first))
        angle[node.id] = a
        # a crowded ring staggers: every other node a little further out, so labels do not collide
        place[node.id] = _on_ring(1, a, 1.45 if len(first) > CROWDED and i % 2 else 1.0)
    parent: dict[int, int] = {}
    for edge in hood.edges:
        for near, far in ((edge.from_id, edge.to_id), (edge.to_id, edge.from_id)):
            if near in angle and far not in angle and far != hood.centre:
                parent.setdefault(far, near)
    children: dict[int | None, list[GraphNode]] = defaultdict(list)
    for node in sorted(by_hop[2], key=lambda n: n.id):
        children[parent.get(node.id)].append(node)
    span = 2 * math.pi / max(1, len(first))
    for owner, kids in children.items():
        base = angle.get(owner, 0.0) if owner is not None else math.pi / 2
        width = span * 0.8 if owner is not None else 2 * math.pi
        for j, node in enumerate(kids):
            # a lone child a little off its parent's ray, so a chain does not hide behind itself
            a = base + width * ((j + 0.5) / len(kids) - 0.5) if len(kids) > 1 else base + width * 0.2
            place[node.id] = _on_ring(2, a)
    return place


def _pairs(edges: list[GraphEdge]) -> dict[tuple[int, int], list[GraphEdge]]:
    out: dict[tuple[int, int], list[GraphEdge]] = defaultdict(list)
    for edge in edges:
        out[(edge.from_id, edge.to_id)].append(edge)
    return out


def draw(hood: Neighbourhood) -> Markup:
    """The neighbourhood as an inline ``<svg>`` (nodes are ``<a href>`` links)."""
    place = layout(hood)
    # the picture is cut to what is drawn: room for the labels beside and under the nodes
    xs, ys = [x for x, _ in place.values()], [y for _, y in place.values()]
    left, top = max(0.0, min(xs) - 80), max(0.0, min(ys) - 40)
    width, height = min(WIDTH, max(xs) + 80) - left, min(HEIGHT, max(ys) + 50) - top
    nodes = {n.id: n for n in hood.nodes}
    parts: list[str] = [
        f'<svg class="graph" viewBox="{left:.0f} {top:.0f} {width:.0f} {height:.0f}" width="{width:.0f}" '
        f'height="{height:.0f}" role="img" '
        f'aria-label="Relationships around {escape(nodes[hood.centre].name) if hood.centre in nodes else "the entity"}"'
        ' xmlns="http://www.w3.org/2000/svg">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#5d6878"/></marker></defs>',
    ]
    pairs = _pairs(hood.edges)
    labels = {pair: ", ".join(dict.fromkeys(e.relation_type for e in group)) for pair, group in pairs.items()}
    # a crowded picture names its commonest relation once, in a caption, instead of on every arrow
    common = Counter(labels.values()).most_common(1)[0][0] if len(pairs) > CROWDED else None
    if common is not None:
        parts.append(f'<text class="caption" x="{left + 6:.0f}" y="{top + height - 8:.0f}" fill="#5d6878">'
                     f'unlabelled arrows: {escape(_label(common, 40))}</text>')
    for (a, b), group in sorted(pairs.items()):
        if a not in place or b not in place:
            continue
        (x1, y1), (x2, y2) = place[a], place[b]
        dx, dy = x2 - x1, y2 - y1
        length = math.hypot(dx, dy) or 1.0
        ux, uy = dx / length, dy / length
        hop_a, hop_b = nodes[a].hop if a in nodes else 0, nodes[b].hop if b in nodes else 0
        sx, sy = x1 + ux * RADIUS[hop_a], y1 + uy * RADIUS[hop_a]
        ex, ey = x2 - ux * (RADIUS[hop_b] + 2), y2 - uy * (RADIUS[hop_b] + 2)
        bend = 28.0 if (b, a) in pairs and a != b else 0.0
        mx, my = (sx + ex) / 2 - uy * bend, (sy + ey) / 2 + ux * bend
        types = labels[(a, b)]
        # the label at the curve's middle: above a flat edge, beside a steep one
        lx, ly = (sx + 2 * mx + ex) / 4, (sy + 2 * my + ey) / 4
        steep = abs(ux) < 0.5
        lx, ly, anchor = (lx + 6, ly + 4, "start") if steep else (lx, ly - 5, "middle")
        title = "; ".join(f"{e.relation_type} (relationship {e.id}, confidence {e.confidence:.2f})" for e in group)
        parts.append(
            f'<g class="edge"><title>{escape(title)}</title>'
            f'<path d="M{sx:.1f},{sy:.1f} Q{mx:.1f},{my:.1f} {ex:.1f},{ey:.1f}" fill="none" stroke="#8a94a6" '
            f'stroke-width="1.5" marker-end="url(#arrow)"/>'
            + ("" if types == common else
               f'<text x="{lx:.1f}" y="{ly:.1f}" text-anchor="{anchor}" fill="#1d2430" stroke="#ffffff" '
               f'stroke-width="3" paint-order="stroke">{escape(_label(types, 28))}</text>')
            + "</g>"
        )
    for node in sorted(hood.nodes, key=lambda n: (n.hop, n.id)):
        if node.id not in place:
            continue
        x, y = place[node.id]
        r = RADIUS[node.hop]
        title = f"{node.name} (entity {node.id}{', ' + node.kind if node.kind else ''}, {node.namespace})"
        bold = ' font-weight="700"' if node.hop == 0 else ""
        parts.append(
            f'<a class="node" data-entity="{node.id}" href="{escape(url(f"/entities/{node.id}"))}">'
            f'<title>{escape(title)}</title>'
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.0f}" fill="{FILL[node.hop]}" stroke="#1d2430" stroke-width="1"/>'
            f'<text x="{x:.1f}" y="{y + r + 14:.1f}" text-anchor="middle" fill="#1d2430" stroke="#ffffff" '
            f'stroke-width="3" paint-order="stroke"{bold}>'
            f'{escape(_label(node.name))}</text></a>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))
