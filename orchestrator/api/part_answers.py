"""A multi-part question's answer as the JSON doors take it (the web API's answer body and
MCP's `answer_session`): `parts`, one entry per part in part order, each exactly one of
`answer` (text, or an option's label), `choices` (option labels) or `action: "decline"`.
Each part is then checked by the core's answer rule against its own question, as
`resume --part N` and `Sessions.answer(id, Reply(parts=...))` are."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from orchestrator.domain.question import UserReply

__all__ = ["PartAnswer", "parts_reply"]


class PartAnswer(BaseModel):
    """One part's answer: exactly one of `answer`, `choices`, `action`."""

    model_config = ConfigDict(extra="forbid")

    answer: str | None = Field(None, description="This part's answer text (or an option's label).")
    choices: list[str] | None = Field(None, description="This part's chosen option labels.")
    action: Literal["decline"] | None = Field(
        None, description="decline: this part's askers proceed on their safe default."
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> PartAnswer:
        given = [n for n in ("answer", "choices", "action") if getattr(self, n) is not None]
        if len(given) != 1:
            got = f" (got {', '.join(given)})" if given else ""
            raise ValueError(f"each part takes exactly one of answer, choices, action{got}")
        return self

    def reply(self) -> UserReply:
        if self.action is not None:
            return UserReply(action="decline")
        if self.choices is not None:
            return UserReply(choices=tuple(self.choices))
        return UserReply(text=self.answer)


def parts_reply(parts: Sequence[PartAnswer], note: str | None = None) -> UserReply:
    """The session API's reply for `parts` (with the whole answer's `note`)."""
    return UserReply(parts=tuple(part.reply() for part in parts), note=note)
