"""Chat models from `PROVIDER:NAME` specs, through LangChain's init_chat_model, or given
as objects (a configured LangChain chat model, a test double from orchestrator.testing).

A session stores its agents' description, so that another process can continue it; a
model given as an object cannot be stored, so it is kept in this process under a name
(`object:CLASS#N`) that the description carries. A session on such a model continues in
the process that has it; elsewhere `resume` is refused with a message saying so.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Mapping
from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.install_hints import install_extra
from orchestrator.model_options import ModelOptions

__all__ = [
    "ENV_MODEL",
    "PROVIDER_EXTRAS",
    "OBJECT",
    "call_kwargs",
    "check_models",
    "given_model",
    "grammar_server",
    "init_model",
    "resolve_models",
]

ENV_MODEL = "ORCHESTRATOR_MODEL"
# The providers with an extra of ours; any other LangChain integration works once installed.
PROVIDER_EXTRAS = {"openai": "openai", "anthropic": "anthropic", "ollama": "ollama"}


# Chat models given as objects, by the name a session's description carries: kept for the
# life of the process, so that a session paused here is resumed here with the same model.
OBJECT = "object:"
_given: dict[str, Any] = {}
_names: dict[int, str] = {}
_numbers = itertools.count(1)
_given_lock = threading.Lock()


def given_model(model: Any, role: str = "an agent") -> str:
    """The name under which the chat model object `model` is kept (the same object keeps
    its name); a spec (`PROVIDER:NAME`) is returned as it is."""
    if isinstance(model, str):
        return model
    if not callable(getattr(model, "invoke", None)):
        raise ConfigError(
            f"the model for {role}: expected PROVIDER:NAME or a LangChain chat model, "
            f"got {type(model).__name__}"
        )
    with _given_lock:
        name = _names.get(id(model))
        if name is None:
            name = f"{OBJECT}{type(model).__name__}#{next(_numbers)}"
            _names[id(model)] = name  # the object is kept below: its id is not reused
            _given[name] = model
        return name


def _given_model(spec: str) -> Any:
    with _given_lock:
        found = _given.get(spec)
    if found is None:
        kind = spec.removeprefix(OBJECT).partition("#")[0]
        raise ConfigError(
            f"this session's model was a chat model object ({kind}) given to the process that "
            "started it, which this process does not have: continue the session from that "
            "program, or start a new one with --model PROVIDER:NAME"
        )
    return found


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
    if spec.startswith(OBJECT):
        return _given_model(spec)
    from langchain.chat_models import init_chat_model

    provider = spec.partition(":")[0]
    kwargs = call_kwargs(provider, options or ModelOptions())
    try:
        model = init_chat_model(spec, **kwargs)
    except ImportError as exc:
        extra = PROVIDER_EXTRAS.get(provider)
        how = (
            install_extra(extra) if extra else f"pip install langchain-{provider.replace('_', '-')}"
        )
        raise ConfigError(f"model {spec!r} needs its LangChain integration: {how} ({exc})") from exc
    except Exception as exc:  # the provider's own check (unknown provider, missing key, ...)
        raise ConfigError(f"cannot use model {spec!r}: {type(exc).__name__}: {exc}") from exc
    from orchestrator.agents.openai_body import send_plain_bulk

    return send_plain_bulk(model)


def check_models(models: Mapping[str, Any], options: ModelOptions | None = None) -> None:
    """Build each model once, so a bad spec fails before a session is created (a model
    given as an object is taken as it is)."""
    chosen = options or ModelOptions()
    for spec in {given_model(model, f"the {role}") for role, model in models.items()}:
        provider = spec.partition(":")[0]
        if spec.startswith(OBJECT):
            init_model(spec)
            continue
        if chosen.reply_mode == "json_schema" and provider not in _JSON_SCHEMA:
            raise ConfigError(
                f"reply mode json_schema is available for the {' and '.join(sorted(_JSON_SCHEMA))} "
                f"providers, not {provider!r}: use --reply-mode tools or text"
            )
        init_model(spec, options=chosen)


# Providers whose structured output (a JSON schema for the answer) the agents can ask for.
_JSON_SCHEMA = {"openai", "ollama"}
