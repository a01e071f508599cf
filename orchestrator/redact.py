"""Secrets out of what is shown: a database URL's password (in its user part or its query)
is masked wherever a URL appears in a message, a hint, a log line or a notification; and
a provider's error that quotes an API key (or a token) shows it masked before it is
stored or printed (`mask_secrets`)."""

from __future__ import annotations

import os
import re

__all__ = ["mask_url", "mask_secrets", "MASK"]

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


# Environment variables whose values are secrets (OPENAI_API_KEY, ANTHROPIC_API_KEY,
# ORCHESTRATOR_WEB_TOKEN, …), and key-shaped words in any text (sk-…, Bearer …).
_SECRET_NAME = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|_KEY)$", re.IGNORECASE)
_KEY_SHAPED = re.compile(
    r"(?<![\w-])(?P<word>(?:sk|pk|rk|gsk|xai|hf)[-_][A-Za-z0-9_-]{12,}|AIza[0-9A-Za-z_-]{20,})"
)
_BEARER = re.compile(r"(?P<head>\bBearer\s+)[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE)


def mask_secrets(text: str) -> str:
    """`text` (a provider's error, say) with URL passwords, the values of this process's
    secret environment variables (names ending in API_KEY, TOKEN, SECRET, PASSWORD, _KEY),
    key-shaped words (`sk-…`, `AIza…`) and bearer tokens replaced by ***."""
    for name, value in os.environ.items():
        if len(value) >= 8 and _SECRET_NAME.search(name) and value in text:
            text = text.replace(value, MASK)
    text = _KEY_SHAPED.sub(MASK, text)
    text = _BEARER.sub(lambda m: f"{m.group('head')}{MASK}", text)
    return mask_url(text)
