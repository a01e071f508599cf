"""A multi-agent orchestrator with a clarification gate.

The core (this package) imports neither Typer nor LangGraph at module level; the CLI in
`orchestrator.cli` and the graph runner in `orchestrator.engine` are the edges that do.
"""

__version__ = "0.1.0"
