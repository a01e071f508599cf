"""How chat-model agents call their models: the server, how replies are structured, and
the budgets every call and turn runs under. One place for their defaults and limits: the
CLI's options, the session API and `docs/reference.md` all read them from here.

They are kept with the session (in its agents' description), so `resume`, a worker and
`serve` call the models the same way the run that started the session did.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from orchestrator.errors import ConfigError
from orchestrator.redact import mask_url

__all__ = ["ModelOptions", "ENV_BASE_URL", "ReplyMode", "ToolChoice"]

ENV_BASE_URL = "ORCHESTRATOR_BASE_URL"

ReplyMode = Literal["tools", "json_schema", "text"]
ToolChoice = Literal["auto", "required"]


class ModelOptions(BaseModel):
    """Options of chat-model agents. Unset fields take the defaults below."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: Annotated[
        str | None,
        Field(
            description="Base URL of an OpenAI-compatible (or Ollama, Anthropic) server, "
            f"e.g. http://127.0.0.1:8080/v1 (or ${ENV_BASE_URL})."
        ),
    ] = None
    reply_mode: Annotated[
        ReplyMode,
        Field(
            description="How replies are structured: tools (a submit_reply tool call), "
            "json_schema (the provider's structured output), text (one JSON object)."
        ),
    ] = "tools"
    tool_choice: Annotated[
        ToolChoice,
        Field(
            description="With reply_mode tools: auto, or required (every answer is a tool call)."
        ),
    ] = "auto"
    call_timeout: Annotated[
        float, Field(gt=0, le=3600, description="Seconds one model call may take.")
    ] = 180.0
    max_output_tokens: Annotated[
        int, Field(strict=True, ge=1, le=1_000_000, description="Output tokens per model call.")
    ] = 4096
    max_model_calls: Annotated[
        int,
        Field(strict=True, ge=1, le=500, description="Model calls in one agent turn."),
    ] = 12
    max_tool_calls: Annotated[
        int,
        Field(strict=True, ge=0, le=5000, description="Workspace tool calls in one agent turn."),
    ] = 40
    turn_timeout: Annotated[
        float, Field(gt=0, le=86400, description="Seconds one agent turn may take in all.")
    ] = 900.0
    max_session_tokens: Annotated[
        int | None,
        Field(
            strict=True,
            ge=1,
            description="Tokens (input + output) the whole session may use; none: no budget.",
        ),
    ] = None
    max_retries: Annotated[
        int,
        Field(
            strict=True,
            ge=0,
            le=10,
            description="Invalid replies sent back to the model for correction in one turn.",
        ),
    ] = 2

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        parts = urlsplit(value.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"expected an http:// or https:// URL such as http://127.0.0.1:8080/v1, "
                f"got {value!r}"
            )
        if parts.username or parts.password:
            raise ValueError(
                "the URL must not carry a user or password (it is kept with the session); "
                "give the key in the provider's environment variable, e.g. OPENAI_API_KEY"
            )
        if parts.query or parts.fragment:
            raise ValueError(
                "the URL must not carry a query string (?…) or fragment (#…): it is kept "
                "with the session and shown, and a key there would be too; give the key in "
                "the provider's environment variable, e.g. OPENAI_API_KEY"
            )
        return value.strip()

    @classmethod
    def of(cls, given: ModelOptions | Mapping[str, Any] | None) -> ModelOptions:
        """Options from an instance, a mapping (None values left out) or nothing; the base
        URL falls back to $ORCHESTRATOR_BASE_URL."""
        if isinstance(given, ModelOptions):
            return given
        values = {k: v for k, v in (given or {}).items() if v is not None}
        if "base_url" not in values and os.environ.get(ENV_BASE_URL):
            values["base_url"] = os.environ[ENV_BASE_URL]
        return cls.model_validate(values)

    @classmethod
    def checked(cls, given: ModelOptions | Mapping[str, Any] | None) -> ModelOptions:
        """`of(given)`, a bad option a ConfigError naming it (the base URL as
        $ORCHESTRATOR_BASE_URL when it came from there) and what it takes, a URL's
        password masked: never pydantic's own text, which dumps the input."""
        values = given.model_dump() if isinstance(given, ModelOptions) else dict(given or {})
        from_env = values.get("base_url") is None and bool(os.environ.get(ENV_BASE_URL))
        try:
            return cls.of(values)
        except ValidationError as exc:

            def named(loc: tuple[Any, ...]) -> str:
                name = ".".join(str(p) for p in loc) or "model options"
                return f"${ENV_BASE_URL}" if name == "base_url" and from_env else name

            problems = "; ".join(
                f"{named(e['loc'])}: " + str(e["msg"]).removeprefix("Value error, ")
                for e in exc.errors(include_url=False)
            )
            raise ConfigError(mask_url(f"model options: {problems}")) from None

    @classmethod
    def from_description(cls, description: Mapping[str, Any]) -> ModelOptions:
        """The options kept in a session's agents description (older sessions kept only
        `max_retries`, and `max_steps`, now `max_model_calls`)."""
        values = {k: v for k, v in description.items() if k in cls.model_fields}
        if "max_steps" in description and "max_model_calls" not in values:
            values["max_model_calls"] = description["max_steps"]
        return cls.model_validate(values)


def options_error(
    exc: ValidationError, values: Mapping[str, Any], *, from_env: bool = False
) -> str:
    """The first problem of invalid model options, naming the option (or the environment
    variable the base URL came from) and what it takes; a URL's password masked, never
    pydantic's `input_value=` dump."""
    error = exc.errors(include_url=False)[0]
    field = str(error["loc"][0]) if error["loc"] else "?"
    message = str(error["msg"]).removeprefix("Value error, ")
    source = (
        f"${ENV_BASE_URL}" if from_env and field == "base_url" else "--" + field.replace("_", "-")
    )
    value = values.get(field)
    if field == "base_url" and isinstance(value, str) and ("?" in value or "#" in value):
        value = value.split("?", 1)[0].split("#", 1)[0] + "?…"  # a key may be in there
    return mask_url(f"{source} {value!r}: {message}")
