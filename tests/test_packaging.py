"""What gets installed: only the `orchestrator` package (agents/, skills/ and migrations/
inside it), from a built wheel as from the editable install, and a user's own `agents`
package in the working directory shadows nothing."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, ROOT

PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import orchestrator.agents, orchestrator.skills, orchestrator.migrations
from orchestrator.store.connect import MIGRATIONS
print(json.dumps({"agents": orchestrator.agents.__file__, "migrations": str(MIGRATIONS)}))
sys.argv = ["orchestrator", *sys.argv[2:]]
from orchestrator.cli import main
main()
"""


def users_own_packages(folder: Path) -> Path:
    """A working directory with the user's own agents/, skills/, migrations/ packages."""
    for name in ("agents", "skills", "migrations"):
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text("raise ImportError('the user’s own')\n")
    return folder


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-qq", "-w", str(out), str(ROOT)],
        check=True,
        timeout=600,
    )
    (built,) = out.glob("*.whl")
    return built


def test_the_wheel_installs_only_the_orchestrator_package(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if ".dist-info" not in n.split("/")[0]}
    assert top == {"orchestrator"}
    for inside in (
        "orchestrator/agents/prompts/pm.md",
        "orchestrator/skills/files.py",
        "orchestrator/migrations/env.py",
        "orchestrator/migrations/script.py.mako",
        "orchestrator/migrations/versions/0001_initial.py",
    ):
        assert inside in names
    assert wheel.name.startswith("gated_orchestrator-")


def test_the_installed_wheel_runs_beside_a_users_own_agents(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-qq", "--no-deps", "--target", str(site)]
        + [str(wheel)],
        check=True,
        timeout=300,
    )
    work = users_own_packages(tmp_path / "work")
    scenario = str(EXAMPLES / "answered-question.yaml")
    result = subprocess.run(
        [sys.executable, "-c", PROBE, str(site), "run", "--script", scenario, "--json"]
        + ["--db", str(tmp_path / "x.db")],
        capture_output=True,
        text=True,
        cwd=work,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    where, document = result.stdout.split("\n", 1)
    assert json.loads(where)["agents"].startswith(str(site))  # the wheel's, not the user's
    assert json.loads(where)["migrations"].startswith(str(site))
    assert json.loads(document)["status"] == "completed"


def test_python_m_orchestrator_beside_a_users_own_agents(tmp_path: Path) -> None:
    """`python -m` puts the working directory first on sys.path: still ours."""
    work = users_own_packages(tmp_path / "work")
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator", "run", "--script"]
        + [str(EXAMPLES / "answered-question.yaml"), "--json", "--db", str(tmp_path / "x.db")],
        capture_output=True,
        text=True,
        cwd=work,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "completed"
