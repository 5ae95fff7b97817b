"""The agent's two models: ChatOpenAI (any OpenAI-compatible endpoint) or the local deterministic one."""

from __future__ import annotations

import os

from langchain_core.language_models import BaseChatModel

from services.agent.config import ModelConfig
from services.agent.round import Models
from services.agent.stand_in_model import MODEL_NAME, DeterministicStandInModel
from services.runtime.errors import UserFacingError


def _is_openai(base_url: str | None) -> bool:
    return not base_url or "api.openai.com" in base_url


def _one(name: str, temperature: float, max_tokens: int) -> tuple[BaseChatModel, str]:
    if name in ("local", MODEL_NAME):
        return DeterministicStandInModel(), MODEL_NAME
    try:
        from langchain_openai import ChatOpenAI

        # OPENAI_API_KEY and OPENAI_BASE_URL come from the environment, as the client reads them.
        # langchain-openai sends the cap as `max_completion_tokens` (OpenAI's name); local servers
        # (llama.cpp, vLLM, Ollama) read `max_tokens`, so any other endpoint gets both (docs/models.md).
        extra_body = None if _is_openai(os.environ.get("OPENAI_BASE_URL")) else {"max_tokens": max_tokens}
        model = ChatOpenAI(
            model=name, temperature=temperature, max_completion_tokens=max_tokens, extra_body=extra_body
        )
        return model, name
    except Exception as exc:  # a missing key is a configuration problem, not a crash
        raise UserFacingError(f"cannot build ChatOpenAI model {name!r}: {exc}") from None


def build_models(config: ModelConfig) -> Models:
    agent, agent_name = _one(config.agent, config.temperature, config.max_tokens)
    judge, judge_name = _one(config.judge, config.temperature, config.max_tokens)
    return Models(agent=agent, judge=judge, agent_name=agent_name, judge_name=judge_name)
