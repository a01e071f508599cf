"""Chat models from `PROVIDER:NAME` specs, through LangChain's init_chat_model."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.install_hints import install_extra
from orchestrator.model_options import ModelOptions

__all__ = [
    "ENV_MODEL",
    "PROVIDER_EXTRAS",
    "call_kwargs",
    "check_models",
    "grammar_server",
    "init_model",
    "resolve_models",
]

ENV_MODEL = "ORCHESTRATOR_MODEL"
# The providers with an extra of ours; any other LangChain integration works once installed.
PROVIDER_EXTRAS = {"openai": "openai", "anthropic": "anthropic", "ollama": "ollama"}


def resolve_models(
    model: str | None, *, pm: str | None = None, developer: str | None = None
) -> dict[str, str] | None:
    """{role: spec} from the options and $ORCHESTRATOR_MODEL; None if nothing names a model."""
    default = model or os.environ.get(ENV_MODEL) or None
    roles = {"pm": pm or default, "developer": developer or default}
    if not any(roles.values()):
        return None
    missing = [role for role, spec in roles.items() if not spec]
    if missing:
        raise ConfigError(
            f"no model for the {missing[0]}: give --model (for every agent) or "
            f"--{missing[0]}-model, or set {ENV_MODEL}"
        )
    for role, spec in roles.items():
        assert spec is not None
        provider, sep, name = spec.partition(":")
        if not sep or not provider or not name:
            raise ConfigError(
                f"model {spec!r} for the {role}: expected PROVIDER:NAME, "
                "e.g. openai:gpt-4o-mini, anthropic:claude-sonnet-4-5, ollama:llama3.1"
            )
    return {role: spec for role, spec in roles.items() if spec}


# Providers whose LangChain class takes these names (timeout, max_tokens, max_retries,
# base_url); others get only what they are known to take. The wall-clock limits are kept
# by the agents' own loop (orchestrator.agents.llm) for every provider alike.
_OPENAI_LIKE = {"openai", "azure_openai", "anthropic", "groq", "deepseek", "xai", "mistralai"}


def call_kwargs(provider: str, options: ModelOptions) -> dict[str, Any]:
    """The chat model's own settings for `options`: the server, the timeout, the output
    length, and no hidden retries beyond the client's usual two."""
    if provider == "ollama":
        kwargs: dict[str, Any] = {
            "num_predict": options.max_output_tokens,
            "client_kwargs": {"timeout": options.call_timeout},
        }
        if options.base_url:
            kwargs["base_url"] = options.base_url
        return kwargs
    if provider not in _OPENAI_LIKE:
        return {"base_url": options.base_url} if options.base_url else {}
    kwargs = {
        "timeout": options.call_timeout,
        "max_tokens": options.max_output_tokens,
        "max_retries": 2,
    }
    if options.base_url:
        kwargs["base_url"] = options.base_url
        if provider == "openai" and not _is_openai(options.base_url):
            # langchain-openai sends the limit as `max_completion_tokens`, which OpenAI
            # itself reads but llama.cpp, vLLM and LM Studio ignore without an error (a
            # 256-token limit once ran to 7,552 tokens): other servers get `max_tokens`.
            del kwargs["max_tokens"]
            kwargs["extra_body"] = {"max_tokens": options.max_output_tokens}
        if provider == "openai" and not os.environ.get("OPENAI_API_KEY"):
            # A local OpenAI-compatible server (llama.cpp, vLLM, LM Studio) wants no key,
            # but the client insists on one: a placeholder, never a secret.
            kwargs["api_key"] = "not-needed"
    return kwargs


def grammar_server(provider: str, options: ModelOptions) -> bool:
    """Does the model run on a server that turns the reply schema into a grammar (Ollama,
    or an OpenAI-compatible server that is not OpenAI: llama.cpp, llama-cpp-python, vLLM)?
    Those get the schema with a branch per status (agents.replies.shown_schema)."""
    if provider == "ollama":
        return True
    url = options.base_url
    return provider == "openai" and bool(url) and not _is_openai(url or "")


def _is_openai(base_url: str) -> bool:
    """Is `base_url` OpenAI's own API (which reads `max_completion_tokens`)?"""
    from urllib.parse import urlsplit

    host = (urlsplit(base_url).hostname or "").lower()
    return host == "openai.com" or host.endswith(".openai.com")


def init_model(spec: str, options: ModelOptions | None = None) -> Any:
    """A LangChain chat model for `spec`; a missing package or key is a ConfigError.

    API keys come from the environment only (each provider reads its own variable); they
    are never passed through here, stored, or logged.
    """
    from langchain.chat_models import init_chat_model

    provider = spec.partition(":")[0]
    kwargs = call_kwargs(provider, options or ModelOptions())
    try:
        return init_chat_model(spec, **kwargs)
    except ImportError as exc:
        extra = PROVIDER_EXTRAS.get(provider)
        how = (
            install_extra(extra) if extra else f"pip install langchain-{provider.replace('_', '-')}"
        )
        raise ConfigError(f"model {spec!r} needs its LangChain integration: {how} ({exc})") from exc
    except Exception as exc:  # the provider's own check (unknown provider, missing key, ...)
        raise ConfigError(f"cannot use model {spec!r}: {type(exc).__name__}: {exc}") from exc


def check_models(models: Mapping[str, str], options: ModelOptions | None = None) -> None:
    """Build each model once, so a bad spec fails before a session is created."""
    chosen = options or ModelOptions()
    for spec in set(models.values()):
        provider = spec.partition(":")[0]
        if chosen.reply_mode == "json_schema" and provider not in _JSON_SCHEMA:
            raise ConfigError(
                f"reply mode json_schema is available for the {' and '.join(sorted(_JSON_SCHEMA))} "
                f"providers, not {provider!r}: use --reply-mode tools or text"
            )
        init_model(spec, options=chosen)


# Providers whose structured output (a JSON schema for the answer) the agents can ask for.
_JSON_SCHEMA = {"openai", "ollama"}
