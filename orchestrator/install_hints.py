"""Install hints that work from where the user is: a source checkout gets the command for
its own virtual environment, an installed copy the one for its PyPI distribution."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

__all__ = ["DISTRIBUTION", "install_extra", "require_extra"]

# The name on PyPI; the command is `orchestrator` and the import package `orchestrator`.
DISTRIBUTION = "gated-orchestrator"


def _checkout() -> Path | None:
    """The source checkout this copy runs from (an editable install), if any."""
    root = Path(__file__).resolve().parent.parent
    pyproject = root / "pyproject.toml"
    try:
        if f'name = "{DISTRIBUTION}"' in pyproject.read_text(encoding="utf-8"):
            return root
    except OSError:
        return None
    return None


def install_extra(extra: str) -> str:
    """The command that installs the optional dependencies `extra` (e.g. "openai")."""
    root = _checkout()
    if root is None:
        return f"pip install '{DISTRIBUTION}[{extra}]'"
    here = Path.cwd().resolve()
    venv_pip = root / ".venv" / "bin" / "pip"
    uses_repo_venv = Path(sys.prefix).resolve() == (root / ".venv").resolve()
    if here == root:
        target = f"'.[{extra}]'"
        pip = ".venv/bin/pip" if uses_repo_venv else f"{shlex.quote(sys.executable)} -m pip"
    else:
        target = shlex.quote(f"{root}[{extra}]")
        pip = str(venv_pip) if uses_repo_venv else f"{shlex.quote(sys.executable)} -m pip"
    return f"{pip} install -e {target}"


def require_extra(extra: str, what: str, *modules: str) -> None:
    """Raise ConfigError (exit 2) with the install command when a module that `extra`
    provides is missing, e.g. require_extra("web", "orchestrator serve", "fastapi")."""
    import importlib.util

    from orchestrator.errors import ConfigError

    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        raise ConfigError(
            f"{what} needs the {extra} extra ({', '.join(missing)} is not installed): "
            f"{install_extra(extra)}"
        )
