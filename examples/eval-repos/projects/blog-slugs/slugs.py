"""Post addresses: /posts/<slug>."""


def slugify(title: str) -> str:
    """The slug of a post's title."""
    raise NotImplementedError
