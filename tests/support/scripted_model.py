"""The scripted model moved to ``testkit/scripted_model.py``; import it from there.

This name re-exports it for tests written before the move.
"""

from __future__ import annotations

from testkit.scripted_model import FactsBlock, ScriptedModel, facts_blocks

__all__ = ["FactsBlock", "ScriptedModel", "facts_blocks"]
