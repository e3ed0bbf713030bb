"""Recognising format refusals by their body, and sizing max_tokens from the answer schema."""

from __future__ import annotations

import pytest

from stash_pipeline.consolidation import model_server
from stash_pipeline.stages import prompts


@pytest.mark.parametrize(
    ("status", "body"),
    [
        # llama.cpp's llama-server before json_schema support: a 500
        (500, '{"error":{"code":500,"message":"\\"response_format\\" must be one of \\"text\\" or \\"json_object\\","'
              ' but got: json_schema","type":"server_error"}}'),
        # LM Studio refusing json_object
        (400, "'response_format.type' must be 'json_schema' or 'text'"),
        # a FastAPI/pydantic server validating the request body
        (422, '{"detail":[{"type":"literal_error","loc":["body","response_format","type"],'
              '"msg":"Input should be \'text\' or \'json_object\'"}]}'),
        # vLLM: a schema its structured-output backend cannot compile
        (400, "The provided JSON schema contains features not supported by xgrammar."),
        (500, "failed to parse grammar"),
        (400, "type must be text or json_object"),
    ],
)
def test_format_refusals_are_recognised_whatever_the_status(status, body):
    assert model_server.is_format_refusal(status, body)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (500, "upstream connect error or disconnect/reset before headers"),
        (502, "Bad Gateway"),
        (503, '{"error": {"message": "Loading model", "type": "unavailable_error"}}'),
        (503, "response_format json_schema: server overloaded"),  # an outage status, whatever it says
        (400, "prompt is too long for the context window"),
        (401, "invalid api key for response_format requests"),
        (404, "model 'qwen' not found, try pulling it first"),
        (429, "rate limit"),
        (None, "connection refused"),
    ],
)
def test_other_errors_are_not_format_refusals(status, body):
    assert not model_server.is_format_refusal(status, body)


def test_budget_grows_with_the_batch_and_stops_at_the_cap():
    one = model_server.output_budget(prompts.FactsAnswer, "Cluster 1:\n[1] a\n[2] b", 4096)
    three = model_server.output_budget(prompts.FactsAnswer, "Cluster 1:\n[1] a\n\nCluster 2:\n[2] b\n\nCluster 3:\n[3] c", 4096)
    per_item = model_server.tokens_per_item(prompts.FactsAnswer)
    assert three - one == 2 * per_item  # clusters count, not their listed episodes
    listed = model_server.output_budget(prompts.RelationshipsAnswer, "\n".join(f"[{i}] fact" for i in range(5)), 4096)
    assert listed == 48 + 5 * model_server.tokens_per_item(prompts.RelationshipsAnswer)
    assert model_server.output_budget(prompts.FactsAnswer, "Cluster 1:\n" * 50, 700) == 700
    assert model_server.output_budget(prompts.FactsAnswer, "", 64) == 64  # the cap wins over the floor
    assert model_server.output_budget(prompts.CausalAnswer, "", 4096) >= 128


def test_text_fields_cost_more_than_numbers():
    assert model_server.tokens_per_item(prompts.FactsAnswer) > model_server.tokens_per_item(prompts.CausalAnswer)
