"""`orchestrator mcp`: an MCP server (the official MCP Python SDK) with the seven tools of
contract section 6 over the session API.

`inputs` declares the tools' inputs and the one result shape, `envelope` builds results
and maps errors to codes, `asking` runs provide_choice/ask_user over elicitation or the web
answer page (its adapter too), `rounds` does it across two calls in the 2026-07-28
protocol era (the session API's `orchestrator.api.mcp_questions` records those questions),
`session_form` is a paused session's question as one form (`ask_session`), `server` wires
the tools, `transports` serves them over stdio or streamable HTTP, and `replay` keeps an
HTTP stream's events for a client that reconnects (loaded only over HTTP).

Needs the `mcp` extra (`pip install 'gated-orchestrator[mcp]'`); `import orchestrator` never
imports it.
"""

from orchestrator.mcp_server.server import TOOLS, build_server
from orchestrator.mcp_server.transports import serve_http, serve_stdio

__all__ = ["build_server", "serve_stdio", "serve_http", "TOOLS"]
