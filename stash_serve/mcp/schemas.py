"""Tool schemas in the form every framework's converter takes.

Agent frameworks turn each tool's JSON Schema into their model vendor's function format,
and each converter reads less of JSON Schema than pydantic writes. ``portable`` rewrites
a schema, keeping what it accepts:

* ``"additionalProperties": true`` becomes ``{}`` (the same open object) and ``false``
  is left out: google-genai's converter walks the value as a schema and fails on a
  boolean, while OpenAI strict conversion closes every object itself. The server still
  refuses undeclared keys, whatever a client was told.
* ``anyOf: [T, {"type": "null"}]`` becomes ``"type": [T, "null"]`` (enum and const
  gaining ``null``), so converters that unwrap a nullable ``anyOf`` keep its description.
  An ``anyOf`` whose arms cannot merge (a ``$ref``, two arms of one type) stays.
* pydantic's generated ``title`` keywords go: nothing reads them, and every agent pays
  for their characters in every request.
"""

from __future__ import annotations

from typing import Any

#: keywords whose value is one schema
_ONE = ("items", "not", "contains", "additionalItems")
#: keywords whose value is a list of schemas
_MANY = ("anyOf", "oneOf", "allOf", "prefixItems")
#: keywords whose value maps names to schemas
_MAP = ("properties", "$defs", "definitions", "patternProperties")


def portable(schema: Any) -> Any:
    """``schema`` rewritten as the module docstring says (a new value; the input is kept)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "additionalProperties" and isinstance(value, bool):
            if value:
                out[key] = {}
            continue
        if key == "additionalProperties" or key in _ONE:
            out[key] = portable(value)
        elif key in _MANY and isinstance(value, list):
            out[key] = [portable(item) for item in value]
        elif key in _MAP and isinstance(value, dict):
            out[key] = {name: portable(item) for name, item in value.items()}
        else:
            out[key] = value
    return _merge_nullable(out)


def _merge_nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``anyOf`` arms of distinct plain types, ``null`` among them, as one ``type`` list."""
    arms = schema.get("anyOf")
    if not isinstance(arms, list) or {"type": "null"} not in arms or len(arms) < 2:
        return schema
    merged: dict[str, Any] = {}
    kinds: list[str] = []
    for arm in arms:
        kind = arm.get("type") if isinstance(arm, dict) else None
        if not isinstance(kind, str) or "$ref" in arm or kind in kinds:
            return schema
        kinds.append(kind)
        for key, value in arm.items():
            if key == "type":
                continue
            if key in merged and merged[key] != value:
                return schema
            merged[key] = value
    if "const" in merged:
        merged["enum"] = [merged.pop("const")]
    if "enum" in merged and None not in merged["enum"]:
        merged["enum"] = [*merged["enum"], None]
    rest = {key: value for key, value in schema.items() if key != "anyOf"}
    if set(rest) & set(merged):
        return schema
    return {"type": kinds, **merged, **rest}


__all__ = ["portable"]
