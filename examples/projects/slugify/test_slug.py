from slug import slugify


def test_lower_case_words_joined_by_hyphens() -> None:
    assert slugify("Hello World") == "hello-world"


def test_punctuation_is_dropped() -> None:
    assert slugify("Hello, World!") == "hello-world"


def test_spaces_around_are_ignored() -> None:
    assert slugify("  Many   spaces  ") == "many-spaces"
