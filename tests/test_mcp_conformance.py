"""The official MCP conformance suite (`@modelcontextprotocol/conformance`) against this
server over streamable HTTP: the server scenarios that apply to it. The others call the
suite's fixture tools (`test_simple_text`, `slow_compute`, ...), resources, prompts,
completions and logging, or the tasks extension, none of which this server offers
(docs/mcp.md, "Conformance").

Nothing is vendored and nothing is fetched: the test runs only where `npx` finds the
package without the network (`npm install @modelcontextprotocol/conformance` in
$ORCHESTRATOR_CONFORMANCE_DIR, default this checkout; it needs Node 22 or later) and is
skipped, saying why, everywhere else."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from orchestrator.mcp_server import build_server
from tests.conftest import ROOT
from tests.mcp_client import served_over_http

# The server scenarios about what this server does (the handshake, sessions, tools/list,
# SSE streams, DNS-rebinding protection, HTTP headers, the 2026-07-28 era's input checks),
# in the suite's names; a version of the suite without one of them runs the others.
APPLICABLE = (
    "server-initialize",
    "server-session-lifecycle",
    "ping",
    "tools-list",
    "server-sse-polling",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
    "http-header-validation",
    "input-required-result-unsupported-methods",
    "input-required-result-validate-input",
    "input-required-result-ignore-extra-params",
)


def _suite() -> tuple[str, Path, list[str]]:
    """npx, where the package is, and the applicable scenarios this version of it has."""
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("npx is not installed (the conformance suite is a Node package)")
    where = Path(os.environ.get("ORCHESTRATOR_CONFORMANCE_DIR", ROOT))
    if not (where / "node_modules" / "@modelcontextprotocol" / "conformance").is_dir():
        pytest.skip(  # asked before npx, which would look the package up in the registry
            f"@modelcontextprotocol/conformance is not installed in {where} (npm install "
            "@modelcontextprotocol/conformance there, with Node 22 or later; or set "
            "ORCHESTRATOR_CONFORMANCE_DIR)"
        )
    listed = subprocess.run(
        [npx, "--no-install", "conformance", "list"],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if listed.returncode != 0:
        lines = listed.stderr.strip().splitlines()
        named = [line for line in lines if re.match(r"(\w*Error\b|npm error)", line)]
        why = (named or lines or ["no output"])[0][:300]
        pytest.skip(f"the conformance suite in {where} does not run (Node 22 or later?): {why}")
    names = {line.strip()[2:].split(" ")[0] for line in listed.stdout.splitlines()}
    return npx, where, [name for name in APPLICABLE if name in names]


def test_the_conformance_suites_server_scenarios_that_apply(tmp_path: Path) -> None:
    npx, where, scenarios = _suite()
    assert scenarios, "this version of the suite has none of the applicable scenarios"

    async def main() -> dict[str, subprocess.CompletedProcess[str]]:
        runs: dict[str, subprocess.CompletedProcess[str]] = {}
        async with served_over_http(build_server(str(tmp_path / "c.db"))) as url:
            for scenario in scenarios:
                argv = [npx, "--no-install", "conformance", "server", "--url", url]
                argv += ["--scenario", scenario, "-o", str(tmp_path / "results")]
                runs[scenario] = await anyio.to_thread.run_sync(
                    lambda argv=argv: subprocess.run(
                        argv, cwd=where, capture_output=True, text=True, timeout=300
                    )
                )
        return runs

    runs = anyio.run(main)
    failed = {name: run.stdout[-3000:] for name, run in runs.items() if run.returncode != 0}
    assert not failed, failed
