"""The reasoner: OpenAI-compatible chat completions returning validated pydantic objects.

One ``Reasoner`` per process (or per run) wraps the real ``openai`` client:

* structured output per ``STASH_REASONER_STRUCTURED``: ``json_schema`` (OpenAI, vLLM),
  ``json_object`` with the schema attached (llama.cpp's server), or ``none``. ``auto``
  starts with ``json_schema`` and steps down on an HTTP 400 rejection; the working mode
  is remembered per endpoint+model for the life of the process;
* tolerant parsing: ``<think>`` blocks (closed or not), code fences and leading prose
  are stripped and the first balanced JSON value is taken; pydantic validates it; an
  invalid answer is retried with the validation error fed back, up to
  ``reasoner_max_attempts`` — then ``ModelResponseInvalid`` (an *item* failure);
* transport failures (timeouts, connection errors, 429, 5xx) are retried with
  exponential backoff ``reasoner_max_retries`` times — then ``ModelUnavailable`` (a
  *run* failure: the stage stops without moving the cursor of the batch in flight);
* every HTTP attempt is written to ``model_calls`` in its own short transaction, so the
  record survives a rolled-back batch; ``RunLedger`` sums calls and tokens for the stage
  report and enforces ``reasoner_token_budget``.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import openai
from pydantic import BaseModel, ValidationError

from stash_pipeline import errors

if TYPE_CHECKING:
    from stash_pipeline.config import Settings
    from stash_pipeline.db.gateway import Database

T = TypeVar("T", bound=BaseModel)

#: structured-output mode that worked, per endpoint+model (process-wide; auto mode only)
_WORKING_MODE: dict[str, str] = {}
#: endpoints whose current mode has answered at least once: a later 400 is about the
#: request (e.g. too long), not the format, so it fails the item instead of stepping down
_CONFIRMED: set[str] = set()
_MODE_LOCK = threading.Lock()
_FALLBACK = {"json_schema": "json_object", "json_object": "none"}


@dataclass
class RunLedger:
    """Calls and tokens spent by one consolidation run; enforces the token budget."""

    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
    token_budget: int | None = None
    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    def check_budget(self) -> None:
        if self.token_budget is not None and self.tokens >= self.token_budget:
            raise errors.TokenBudgetExceeded(
                f"token budget of {self.token_budget} spent ({self.tokens} tokens in {self.calls} calls)"
            )

    def add(self, prompt_tokens: int, completion_tokens: int) -> None:
        self.calls += 1
        self.tokens_in += prompt_tokens
        self.tokens_out += completion_tokens


# -- parsing ---------------------------------------------------------------------------
_THINK_CLOSED = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def _balanced_values(text: str) -> list[str]:
    """Every top-level balanced {...} / [...] span of ``text``, in order (strings respected)."""
    spans: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] not in "{[":
            i += 1
            continue
        depth, j, in_string, escaped = 0, i, False, False
        end = -1
        while j < n:
            ch = text[j]
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch in "{[":
                depth += 1
            elif ch in "}]":
                depth -= 1
                if depth == 0:
                    end = j
                    break
            j += 1
        if end < 0:
            i += 1
            continue
        spans.append(text[i : end + 1])
        i = end + 1
    return spans


def extract_json(text: str | None) -> Any:
    """The first JSON object/array in a model answer, after removing thinking, fences and prose.

    Raises ``ValueError`` when there is none.
    """
    if not text or not text.strip():
        raise ValueError("empty answer")
    body = _THINK_CLOSED.sub("", text)
    lowered = body.lower()
    if "</think>" in lowered:  # opening tag missing: everything before the close is thinking
        body = body[lowered.rindex("</think>") + len("</think>") :]
    unclosed = "<think>" in body.lower()
    if unclosed:  # thinking never closed: the answer, if any, is the last JSON value
        body = body[body.lower().index("<think>") + len("<think>") :]
    candidates: list[str] = [m.group(1) for m in _FENCE.finditer(body)]
    spans = _balanced_values(body)
    candidates += list(reversed(spans)) if unclosed else spans
    for candidate in candidates:
        try:
            return json.loads(candidate.strip())
        except json.JSONDecodeError:
            continue
    raise ValueError("no JSON object or array found in the answer")


def parse_answer(text: str | None, schema: type[T]) -> T:
    """Parse and validate one answer; a bare array is accepted for a one-list-field schema."""
    value = extract_json(text)
    if isinstance(value, list):
        list_fields = [name for name, f in schema.model_fields.items() if _is_list(f.annotation)]
        if len(schema.model_fields) == 1 and list_fields:
            value = {list_fields[0]: value}
    return schema.model_validate(value)


def _is_list(annotation: Any) -> bool:
    origin = getattr(annotation, "__origin__", None)
    return origin is list or str(annotation).startswith("list[")


def _error_text(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        parts = []
        for err in exc.errors()[:8]:
            loc = ".".join(str(p) for p in err["loc"])
            parts.append(f"{loc}: {err['msg']}")
        return "; ".join(parts)
    return str(exc)


# -- the reasoner ------------------------------------------------------------------------
class Reasoner:
    """Structured chat calls with retries, parsing, validation and cost accounting."""

    def __init__(self, settings: Settings, db: Database | None) -> None:
        if not settings.reasoner_configured:
            raise errors.ReasonerNotConfigured()
        self.settings = settings
        self.db = db
        self.model = str(settings.reasoner_model)
        self.base_url = str(settings.openai_base_url)
        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else "not-needed"
        # Retries are ours (so each attempt is recorded and the policy is one place).
        self.client = openai.OpenAI(
            base_url=self.base_url, api_key=key, timeout=settings.reasoner_timeout_s, max_retries=0
        )

    @property
    def endpoint_key(self) -> str:
        return f"{self.base_url}|{self.model}"

    def mode(self) -> str:
        if self.settings.reasoner_structured != "auto":
            return self.settings.reasoner_structured
        with _MODE_LOCK:
            return _WORKING_MODE.get(self.endpoint_key, "json_schema")

    def call(
        self,
        stage: str,
        namespace_id: int | None,
        system: str,
        user: str,
        schema: type[T],
        *,
        run: RunLedger,
        validate: Callable[[T], None] | None = None,
    ) -> T:
        """One validated answer, or ModelResponseInvalid / ModelUnavailable / TokenBudgetExceeded.

        ``validate`` may raise ``ValueError`` (e.g. an id that is not in the listing); its
        message is fed back to the model like a schema error.
        """
        messages: list[dict[str, str]] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        last_error = ""
        for _attempt in range(self.settings.reasoner_max_attempts):
            content = self._complete(stage, namespace_id, messages, schema, run)
            try:
                answer = parse_answer(content, schema)
                if validate is not None:
                    validate(answer)
                return answer
            except (ValueError, ValidationError) as exc:
                last_error = _error_text(exc)
                messages = [
                    *messages,
                    {"role": "assistant", "content": content or ""},
                    {
                        "role": "user",
                        "content": "Your previous answer was invalid: "
                        + last_error
                        + "\nAnswer again with ONLY the JSON value matching the schema.",
                    },
                ]
        raise errors.ModelResponseInvalid(
            f"invalid model answer after {self.settings.reasoner_max_attempts} attempts: {last_error}"[:1000]
        )

    # -- one completion with transport retries and format fallback ------------------
    def _response_format(self, mode: str, schema: type[BaseModel]) -> dict[str, Any] | None:
        json_schema = schema.model_json_schema()
        if mode == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": schema.__name__, "schema": json_schema}}
        if mode == "json_object":
            return {"type": "json_object", "schema": json_schema}
        return None

    def _complete(
        self,
        stage: str,
        namespace_id: int | None,
        messages: list[dict[str, str]],
        schema: type[BaseModel],
        run: RunLedger,
    ) -> str | None:
        retries = 0
        mode = self.mode()
        attempt = 0
        while True:
            run.check_budget()
            attempt += 1
            kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": 0}
            response_format = self._response_format(mode, schema)
            if response_format is not None:
                kwargs["response_format"] = response_format
            started = time.monotonic()
            try:
                response = self.client.chat.completions.create(**kwargs)
            except openai.BadRequestError as exc:
                self._record(stage, namespace_id, run, started, attempt, ok=False, error=f"400: {exc.message}"[:500])
                with _MODE_LOCK:
                    confirmed = self.endpoint_key in _CONFIRMED
                if self.settings.reasoner_structured == "auto" and mode in _FALLBACK and not confirmed:
                    mode = _FALLBACK[mode]
                    with _MODE_LOCK:
                        _WORKING_MODE[self.endpoint_key] = mode
                    continue
                # The endpoint accepts our format, so this request itself is the problem.
                raise errors.ModelResponseInvalid(f"model endpoint rejected the request: {exc.message}"[:1000]) from exc
            except (openai.APITimeoutError, openai.APIConnectionError, openai.APIStatusError) as exc:
                status = getattr(exc, "status_code", None)
                transient = status is None or status == 429 or status >= 500
                label = "timeout" if isinstance(exc, openai.APITimeoutError) else (
                    f"{status}" if status else "connection error"
                )
                self._record(stage, namespace_id, run, started, attempt, ok=False, error=f"{label}: {exc}"[:500])
                if not transient or retries >= self.settings.reasoner_max_retries:
                    raise errors.ModelUnavailable(
                        f"model endpoint unavailable after {retries + 1} tries ({label})"
                    ) from exc
                time.sleep(self.settings.reasoner_backoff_s * (2**retries))
                retries += 1
                continue
            except (ValueError, openai.APIResponseValidationError) as exc:
                # A 200 whose body is not the JSON it claims (cut off by a proxy or a dropped
                # connection): a transport failure like a 5xx — recorded, retried, then
                # ModelUnavailable; never a raw JSONDecodeError out of the stage.
                self._record(
                    stage, namespace_id, run, started, attempt, ok=False,
                    error=f"invalid response body: {exc}"[:500],
                )
                if retries >= self.settings.reasoner_max_retries:
                    raise errors.ModelUnavailable(
                        f"model endpoint unavailable after {retries + 1} tries (invalid response body)"
                    ) from exc
                time.sleep(self.settings.reasoner_backoff_s * (2**retries))
                retries += 1
                continue
            if self.settings.reasoner_structured == "auto":
                with _MODE_LOCK:
                    _CONFIRMED.add(self.endpoint_key)
            usage = response.usage
            prompt_tokens = int(usage.prompt_tokens) if usage else 0
            completion_tokens = int(usage.completion_tokens) if usage else 0
            run.add(prompt_tokens, completion_tokens)
            self._record(
                stage, namespace_id, run, started, attempt, ok=True,
                prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
            )
            choice = response.choices[0] if response.choices else None
            return choice.message.content if choice else None

    def _record(
        self,
        stage: str,
        namespace_id: int | None,
        run: RunLedger,
        started: float,
        attempt: int,
        *,
        ok: bool,
        error: str | None = None,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
    ) -> None:
        if self.db is None:
            return
        # Own short transaction: the record must survive a rolled-back batch.
        self.db.execute(
            "consolidation_record_model_call",
            namespace_id=namespace_id,
            stage=stage,
            run_id=run.run_id,
            model=self.model,
            endpoint=self.base_url,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_ms=int((time.monotonic() - started) * 1000),
            attempt=attempt,
            ok=ok,
            error=error,
        )


def reset_mode_cache() -> None:
    """Forget remembered structured-output modes (tests)."""
    with _MODE_LOCK:
        _WORKING_MODE.clear()
        _CONFIRMED.clear()
