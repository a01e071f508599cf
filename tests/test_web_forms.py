"""The answer form read as a Reply (no server needed)."""

from __future__ import annotations

import pytest
from starlette.datastructures import FormData

from orchestrator.api import Reply
from orchestrator.domain.question import to_gate_event
from orchestrator.errors import InvalidAnswer
from orchestrator.web.forms import OTHER, reply_from_form

SINGLE = {"kind": "single_select", "options": [{"label": "A"}, {"label": "B"}], "allow_other": True}
MULTI = {**SINGLE, "kind": "multi_select"}


def form(*pairs: tuple[str, str]) -> FormData:
    return FormData(list(pairs))


@pytest.mark.parametrize(
    ("question", "data", "reply"),
    [
        ({"kind": "free_text"}, [("text", "weekly")], Reply(text="weekly")),
        (SINGLE, [], Reply()),  # nothing chosen: refused by the one answer rule (below)
        (SINGLE, [("choice", "B")], Reply(choices=("B",))),
        (SINGLE, [("choice", OTHER), ("other", " mine ")], Reply(text="mine")),  # own: text
        (SINGLE, [("other", "mine")], Reply(text="mine")),
        (MULTI, [("choice", "A"), ("choice", "B")], Reply(choices=("A", "B"))),
        (MULTI, [("choice", "A"), ("other", "C")], Reply(choices=("A",), text="C")),
        (SINGLE, [("action", "decline"), ("note", "n")], Reply(action="decline", note="n")),
        (SINGLE, [("choice", "A"), ("note", "  why  ")], Reply(choices=("A",), note="why")),
    ],
)
def test_forms_become_replies(question: dict, data: list, reply: Reply) -> None:
    assert reply_from_form(question, form(*data)) == reply


@pytest.mark.parametrize(
    ("question", "data", "says"),
    [
        (SINGLE, [("choice", OTHER)], "write it in the text field"),
        (SINGLE, [("choice", "A"), ("other", "mine")], "also wrote an answer of your own"),
        (SINGLE, [("action", "delete")], "unknown action"),
    ],
)
def test_unclear_forms_are_refused(question: dict, data: list, says: str) -> None:
    with pytest.raises(InvalidAnswer, match=says):
        reply_from_form(question, form(*data))


def test_a_form_with_nothing_chosen_is_refused_in_the_words_of_every_door() -> None:
    """The form adds no wording of its own: the CLI, the JSON API and MCP say the same."""
    with pytest.raises(InvalidAnswer) as refused:
        to_gate_event(SINGLE, reply_from_form(SINGLE, form()))  # type: ignore[arg-type]
    assert refused.value.message == "the answer is empty; choose one of the options: 1. A; 2. B"
