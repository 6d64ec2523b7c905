"""The LLM side of skill synthesis: the strict validator and OpenAIProvider.synthesize_skill
against the fake OpenAI server."""

import pytest

from ultron.llm.errors import LLMInvalidAnswer
from ultron.prompts.skills import skill_prompt, validate_skill
from ultron.providers import OpenAIProvider, RulesProvider
from ultron.settings import Settings
from ultron.testing.fake_openai import FakeOpenAI, Reply

MEMORIES = [{"id": f"id-{i}", "memory_type": "error", "content": f"problem {i}", "context": f"context {i}",
             "resolution": f"Run `fix{i}.sh`"} for i in range(1, 4)]
ANSWER = {"name": "Fixes", "description": "Run the fix scripts.", "when_to_use": "When things break",
          "steps": [{"text": "Run fix1.sh", "evidence": ["m1", "[m2]", 3, "id-3"]}],
          "pitfalls": [{"text": "Forgetting fix2", "evidence": "m2"}],
          "decision_branches": [{"if": "context 3", "then": "run fix3.sh", "evidence": ["m3"]}]}


def test_validator_maps_references_to_ids_and_normalises():
    refs = {"m1": "id-1", "m2": "id-2", "m3": "id-3"}
    skill = validate_skill(ANSWER, refs)
    assert skill["steps"] == [{"text": "Run fix1.sh", "evidence": ["id-1", "id-2", "id-3"]}]
    assert skill["pitfalls"] == [{"text": "Forgetting fix2", "evidence": ["id-2"]}]
    assert skill["branches"] == [{"condition": "context 3", "action": "run fix3.sh", "evidence": ["id-3"]}]
    assert skill["when_to_use"] == ["When things break"]
    # unknown references are kept as given, for the quality gate to reject
    unknown = validate_skill({**ANSWER, "steps": [{"text": "x", "evidence": ["m9"]}]}, refs)
    assert unknown["steps"][0]["evidence"] == ["m9"]


@pytest.mark.parametrize("bad, message", [
    ([], "expected a skill object"),
    ({**ANSWER, "steps": []}, "at least one step"),
    ({**ANSWER, "steps": "do it"}, "steps must be a list"),
    ({**ANSWER, "steps": ["do it"]}, "steps[1] must be an object"),
    ({**ANSWER, "steps": [{"text": "", "evidence": []}]}, "steps[1].text must be a non-empty string"),
    ({**ANSWER, "steps": [{"text": "x", "evidence": [{"id": 1}]}]}, "not a memory id"),
    ({**ANSWER, "name": None}, "name must be a non-empty string"),
    ({**ANSWER, "description": "x" * 2000}, "description has 2000 characters"),
    ({**ANSWER, "decision_branches": [{"if": "a"}]}, "decision_branches[1].then"),
    ({**ANSWER, "steps": [{"text": "x", "evidence": []}] * 41}, "at most 40"),
])
def test_validator_rejects_bad_shapes_with_a_located_message(bad, message):
    with pytest.raises(ValueError) as exc:
        validate_skill(bad)
    assert message in str(exc.value)


def test_prompt_numbers_memories_within_the_budget():
    from ultron.llm.tokens import count_tokens

    body, refs = skill_prompt("topic x", MEMORIES * 3, budget=2000)
    assert refs["m1"] == "id-1" and len(refs) == 9 and body.startswith("Topic: topic x")
    body, refs = skill_prompt("topic x", MEMORIES * 100, budget=2000)
    assert 50 < len(refs) < 300 and count_tokens(body) <= 2000 + 20
    long = [{**MEMORIES[0], "resolution": "word " * 5000}]
    assert count_tokens(skill_prompt("t", long, budget=1000)[0]) <= 1000 + 20


def test_openai_provider_synthesizes_against_the_fake_server():
    with FakeOpenAI() as server:
        settings = Settings.from_env({}, llm_provider="openai", llm_base_url=server.url, llm_api_key="k",
                                     llm_retry_base_seconds=0.01)
        provider = OpenAIProvider(settings)
        server.script(Reply.json(ANSWER))
        skill = provider.synthesize_skill("fixes", MEMORIES)
        assert skill["steps"][0]["evidence"] == ["id-1", "id-2", "id-3"]
        user = server.requests[0]["messages"][1]["content"]
        assert "[m2] type: error" in user and "resolution: Run `fix2.sh`" in user
        server.script(Reply.text("no"), Reply.json({"name": "x"}))
        with pytest.raises(LLMInvalidAnswer, match="skill synthesis"):
            provider.synthesize_skill("fixes", MEMORIES)
        assert provider.usage.calls == 3 and provider.usage.failures == 2


def test_rules_provider_synthesizes_offline():
    skill = RulesProvider().synthesize_skill("fixes", MEMORIES)
    assert [s["text"] for s in skill["steps"]] == ["Run `fix1.sh`", "Run `fix2.sh`", "Run `fix3.sh`"]
    assert RulesProvider().synthesize_skill("", [])["steps"] == []
