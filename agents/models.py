"""Chat models from `PROVIDER:NAME` specs, through LangChain's init_chat_model."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from orchestrator.errors import ConfigError
from orchestrator.install_hints import install_extra

__all__ = ["ENV_MODEL", "PROVIDER_EXTRAS", "check_models", "init_model", "resolve_models"]

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


def init_model(spec: str, **kwargs: Any) -> Any:
    """A LangChain chat model for `spec`; a missing package or key is a ConfigError.

    API keys come from the environment only (each provider reads its own variable); they
    are never passed through here, stored, or logged.
    """
    from langchain.chat_models import init_chat_model

    provider = spec.partition(":")[0]
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


def check_models(models: Mapping[str, str]) -> None:
    """Build each model once, so a bad spec fails before a session is created."""
    for spec in set(models.values()):
        init_model(spec)
