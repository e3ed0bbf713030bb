"""stash_serve.stdio.error_for: which JSON-RPC error answers a line the stdio transport could not read."""

from __future__ import annotations

import mcp_types as types
import pytest

from stash_serve.stdio import INVALID_REQUEST, PARSE_ERROR, error_for


def _failure(line: str) -> Exception:
    with pytest.raises(Exception) as info:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    return info.value


@pytest.mark.parametrize("line", ['{"jsonrpc":"2.0","id":1,"method":"ping","params":{"q":"\\ud800"}}',
                                  "not json", '{"jsonrpc":"2.0","id":1,'])
def test_a_line_that_is_no_json_is_a_parse_error_with_a_null_id(line: str) -> None:
    error = error_for(_failure(line))
    assert error.id is None and error.error.code == PARSE_ERROR
    assert "ud800" not in error.error.message and "not json" not in error.error.message  # input never echoed


def test_json_that_is_no_json_rpc_message_is_an_invalid_request() -> None:
    error = error_for(_failure('{"hello": "world"}'))
    assert error.id is None and error.error.code == INVALID_REQUEST
