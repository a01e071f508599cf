"""An answer as the JSON doors take it (the web API's answer body and MCP's
`answer_session`, one model for both): exactly one of `answer`, `choices`, `action`,
`parts`. A multi-part question's `parts` are one entry per part in part order, each exactly
one of `answer` (text, or an option's label), `choices` (option labels) or
`action: "decline"`. What they hold is then checked by the core's answer rule, as `resume`
and `Sessions.answer(id, Reply(...))` are: the same checks and messages on every door."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from orchestrator.domain.question import UserReply

__all__ = ["AnswerFields", "PartAnswer", "parts_reply"]


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


class AnswerFields(BaseModel):
    """Exactly one of `answer`, `choices`, `action`, `parts` (a multi-part question's
    answers, one per part in part order); `note` is kept with it. Text is taken without
    the whitespace around it."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    answer: str | None = Field(None, description="The answer text (or one option's label).")
    choices: list[str] | None = Field(
        None, min_length=1, description="The chosen options' labels, for a select question."
    )
    action: Literal["decline", "cancel"] | None = Field(
        None,
        description="decline: resolve without an answer (the asking agents proceed on their "
        "own assumptions; a multi-part question is declined whole); cancel: stop the session.",
    )
    parts: list[PartAnswer] | None = Field(
        None,
        min_length=1,
        description="A multi-part question's answers (its pending_question has `parts`), one "
        'per part in part order, each exactly one of answer, choices, action ("decline").',
    )
    note: str | None = Field(None, description="A remark kept with the answer.")

    @model_validator(mode="after")
    def _exactly_one(self) -> AnswerFields:
        given = [
            n for n in ("answer", "choices", "action", "parts") if getattr(self, n) is not None
        ]
        if len(given) != 1:
            raise ValueError(
                "give exactly one of answer, choices, action, parts "
                f"(got {', '.join(given) if given else 'none'})"
            )
        return self

    def reply(self) -> UserReply:
        """The session API's reply."""
        if self.parts is not None:
            return parts_reply(self.parts, self.note)
        if self.action is not None:
            return UserReply(action=self.action, note=self.note)
        if self.choices is not None:
            return UserReply(choices=tuple(self.choices), note=self.note)
        return UserReply(text=self.answer, note=self.note)
