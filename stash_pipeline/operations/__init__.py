"""Every memory operation, declared once (see ``stash_pipeline.operations.base``).

One module per subject, beside ``stash_pipeline/memory/<subject>.py``; each exports
``OPERATIONS``. The MCP tools (``stash_serve.mcp.derive``) and the CLI commands
(``stash_serve.cli.derive``) are built from these declarations. Nothing here imports
an MCP or CLI library.
"""

from __future__ import annotations

from stash_pipeline.operations import (
    admin,
    consolidation,
    context,
    contradictions,
    entities,
    episodes,
    facts,
    failures,
    goals,
    graph,
    hypotheses,
    namespaces,
    recall,
)

#: the subjects declared here, in the order clients list their tools
SUBJECTS = (
    namespaces, episodes, recall, context, facts, entities, graph, contradictions, hypotheses, goals, failures,
    consolidation, admin,
)

__all__ = ["SUBJECTS"]
