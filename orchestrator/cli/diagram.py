"""`orchestrator graph`: the agents' graph as Mermaid text, drawn by LangGraph."""

from __future__ import annotations

import json

import typer

from orchestrator.cli.options import JsonOption

__all__ = ["graph"]


def graph(as_json: JsonOption = False) -> None:
    """Print the graph (pm, developers, the gate) as a Mermaid diagram."""
    from orchestrator.api.running import graph_diagram

    text = graph_diagram()
    if as_json:
        typer.echo(json.dumps({"mermaid": text}, indent=2))
    else:
        typer.echo(text.rstrip("\n"))
