"""Turn titles into URL slugs."""


def slugify(title: str) -> str:
    """'Hello, World!' -> 'hello-world'."""
    return title
