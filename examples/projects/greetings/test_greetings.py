from greetings import greet


def test_english() -> None:
    assert greet("en", "Ada") == "Hello, Ada!"
