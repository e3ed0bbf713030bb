"""Stash: long-term memory for AI agents (data system)."""

from __future__ import annotations

__version__ = "0.1.0"
