"""One tiny structured call to the reasoning model, for ``stash doctor``.

It goes through the real ``Reasoner`` (so the call is in ``model_calls`` under the stage
name ``doctor``), negotiates the structured-output mode afresh in ``auto`` mode (a
server upgraded since the mode was remembered is noticed, and the new mode is stored),
and turns each failure it recognises into the fix a user can apply.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import openai
from pydantic import BaseModel

from stash_pipeline import errors
from stash_pipeline.consolidation import model_server
from stash_pipeline.consolidation.reasoner import Reasoner, RunLedger

if TYPE_CHECKING:
    from stash_pipeline.config import Settings
    from stash_pipeline.db import Database

SYSTEM = 'You check that you are reachable. Answer with ONE JSON object: {"ok": true}. Nothing else.'
USER = "Are you there?"
#: room for the answer and a short preamble; a model that needs more is a thinking model
MAX_TOKENS = 64


class Ping(BaseModel):
    ok: bool | None = None


@dataclass
class ProbeResult:
    ok: bool
    endpoint: str
    model: str
    mode: str
    latency_ms: int
    detail: str

    def line(self) -> str:
        where = f"{self.model} at {self.endpoint}"
        if self.ok:
            return f"{where}: structured call answered in {self.latency_ms} ms, mode {self.mode}{self.detail}"
        return f"{where}: {self.detail}"


def probe(settings: Settings, db: Database | None) -> ProbeResult:
    """Make the call; never raises for a model failure (the result says what to fix)."""
    # One try: a doctor reports what it sees instead of waiting through backoffs.
    quick = settings.model_copy(update={"reasoner_max_retries": 0, "reasoner_max_attempts": 1})
    reasoner = Reasoner(quick, db)
    endpoint, model = reasoner.base_url, reasoner.model
    if reasoner.auto:
        model_server.renegotiate(endpoint, model)
    started = time.monotonic()
    try:
        reasoner.call("doctor", None, SYSTEM, USER, Ping, run=RunLedger(), max_tokens=MAX_TOKENS)
    except (errors.ModelError, errors.ConfigurationError) as exc:
        latency = int((time.monotonic() - started) * 1000)
        return ProbeResult(False, endpoint, model, reasoner.mode(), latency, explain(exc, quick))
    latency = int((time.monotonic() - started) * 1000)
    mode = reasoner.mode()
    note = ""
    if reasoner.auto and db is not None:
        row = db.one("reasoner_mode_get", endpoint=endpoint, model=model)
        if row and row["reason"]:
            note = f" (a richer mode was refused: {row['reason'][:160]})"
    return ProbeResult(True, endpoint, model, mode, latency, note)


def explain(exc: Exception, settings: Settings) -> str:
    """What failed and how to fix it, for the failures a user meets first."""
    cause = exc.__cause__
    model = settings.reasoner_model
    if isinstance(cause, openai.APITimeoutError):
        return (
            f"no answer within {settings.reasoner_timeout_s:g} s — fix: the server may be busy with another "
            "request or too slow for this model; raise STASH_REASONER_TIMEOUT_S or use a smaller model"
        )
    if isinstance(cause, openai.APIConnectionError):
        return (
            f"connection refused ({settings.openai_base_url}) — fix: start the model server, or correct "
            "STASH_OPENAI_BASE_URL (host, port and the /v1 suffix)"
        )
    if isinstance(cause, openai.APIStatusError):
        status = cause.status_code
        if status in (401, 403):
            return f"HTTP {status}: the API key was refused — fix: set STASH_OPENAI_API_KEY to a valid key"
        if status == 404:
            return (
                f"HTTP 404: no model {model!r} here (or no chat route) — fix: set STASH_REASONER_MODEL to a "
                "model the server lists at GET /v1/models (Ollama: `ollama pull` it first), and check that "
                "STASH_OPENAI_BASE_URL ends in /v1"
            )
        if model_server.is_format_refusal(status, model_server.error_body(cause)):
            return (
                f"HTTP {status}: the server refuses response_format {settings.reasoner_structured} — fix: "
                "set STASH_REASONER_STRUCTURED=auto to let Stash find the mode it accepts"
            )
        return f"HTTP {status}: {cause.message}"[:400]
    if isinstance(exc, errors.ModelOutputTruncated):
        return (
            f"the model did not finish a one-line JSON answer within {MAX_TOKENS} tokens — fix: a thinking "
            "model spends its tokens thinking; turn thinking off on the server or pick an instruct model"
        )
    if isinstance(exc, errors.ModelResponseInvalid):
        return (
            f"the model answers, but not with the JSON asked for ({exc.message[:160]}) — fix: use an "
            "instruction-tuned model, or STASH_REASONER_STRUCTURED=auto so the server constrains the output"
        )
    return getattr(exc, "message", str(exc))[:400]


def describe_modes(settings: Settings, db: Database) -> list[str]:
    """One line per endpoint + model with the structured-output mode in use (``consolidate status``)."""
    lines = []
    known = model_server.known_modes(db)
    for row in known:
        when = f"answered {row['verified_at']:%Y-%m-%d %H:%M}" if row["verified_at"] else "not answered yet"
        refused = f"; refused before: {row['reason'][:120]}" if row["reason"] else ""
        lines.append(f"structured output: {row['model']} at {row['endpoint']}: {row['mode']} ({when}){refused}")
    if not settings.reasoner_configured:
        return lines
    current = f"structured output: {settings.reasoner_model} at {settings.openai_base_url}: "
    if settings.reasoner_structured != "auto":
        lines.append(current + f"{settings.reasoner_structured} (set by STASH_REASONER_STRUCTURED)")
    elif not any((r["endpoint"], r["model"]) == (settings.openai_base_url, settings.reasoner_model) for r in known):
        lines.append(current + "not negotiated yet (the first call finds the mode the server accepts)")
    return lines
