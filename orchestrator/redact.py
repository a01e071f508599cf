"""Secrets out of what is shown: a database URL's password (in its user part or its query)
is masked wherever a URL appears in a message, a hint, a log line or a notification."""

from __future__ import annotations

import re

__all__ = ["mask_url", "MASK"]

MASK = "***"

# scheme://user:password@host  and  ?password=...&sslpassword=...  (any case)
_USERINFO = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/@:?#\s]*):(?P<secret>[^@/?#\s]*)@")
# user:password@host anywhere else (a URL missing its slashes, a path meant as one)
_LOOSE = re.compile(r"(?P<head>[\w.~%+-]+):(?P<secret>[^@/\s'\":]+)@(?=[\w.\[\]-])")
_QUERY = re.compile(
    r"(?P<key>[?&;](?:[a-z_]*pass(?:word)?|pwd|token|secret|api_?key|sslkey\w*))=(?P<value>[^&;#\s]*)",
    re.IGNORECASE,
)


def mask_url(text: str) -> str:
    """`text` with every URL password (user part or query) replaced by ***."""
    text = _USERINFO.sub(lambda m: f"{m.group('head')}:{MASK}@", text)
    text = _LOOSE.sub(lambda m: f"{m.group('head')}:{MASK}@", text)
    return _QUERY.sub(lambda m: f"{m.group('key')}={MASK}", text)
