"""The scripted OpenAI-compatible server moved to ``testkit/openai_server.py``; import it from there.

This name re-exports it for tests written before the move.
"""

from __future__ import annotations

from testkit.openai_server import Reply, ScriptedOpenAI, last_user_message, system_prompt

__all__ = ["Reply", "ScriptedOpenAI", "last_user_message", "system_prompt"]
