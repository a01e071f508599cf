"""Secrets out of what is shown: a database URL's password (in its user part or its query)
is masked wherever a URL appears in a message, a hint, a log line or a notification."""

from __future__ import annotations

import re

__all__ = ["mask_url", "MASK"]

MASK = "***"

# scheme://user:password@host  and  ?password=...&sslpassword=...  (any case). A match
# starts only where a run of its characters starts (the lookbehinds), and the runs are
# bounded: without that, a long word (a 100,000-character id in an error) made each
# pattern try every position against the rest of the text, minutes of CPU per message.
_USERINFO = re.compile(
    r"(?<![A-Za-z0-9+.-])(?P<head>[A-Za-z][A-Za-z0-9+.-]{0,63}://[^/@:?#\s]{0,1024})"
    r":(?P<secret>[^@/?#\s]{0,1024})@"
)
# user:password@host anywhere else (a URL missing its slashes, a path meant as one)
_LOOSE = re.compile(
    r"(?<![\w.~%+-])(?P<head>[\w.~%+-]{1,1024}):(?P<secret>[^@/\s'\":]{1,1024})@(?=[\w.\[\]-])"
)
_QUERY = re.compile(
    r"(?P<key>[?&;](?:[a-z_]*pass(?:word)?|pwd|token|secret|api_?key|sslkey\w*))=(?P<value>[^&;#\s]*)",
    re.IGNORECASE,
)


def mask_url(text: str) -> str:
    """`text` with every URL password (user part or query) replaced by ***."""
    text = _USERINFO.sub(lambda m: f"{m.group('head')}:{MASK}@", text)
    text = _LOOSE.sub(lambda m: f"{m.group('head')}:{MASK}@", text)
    return _QUERY.sub(lambda m: f"{m.group('key')}={MASK}", text)
