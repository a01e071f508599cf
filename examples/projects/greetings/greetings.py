"""Greetings in a few languages."""

GREETINGS = {
    "en": "Hello",
}


def greet(language: str, name: str) -> str:
    return f"{GREETINGS[language]}, {name}!"
