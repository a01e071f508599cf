"""Packages: the repository keeps agents/, skills/ and migrations/ at its top, and they
install as orchestrator.agents, orchestrator.skills and orchestrator.migrations, so that
nothing generic lands in site-packages (where `agents` would collide with other projects)
and a user's own `agents/` in the working directory cannot shadow ours. Everything else
is in pyproject.toml."""

from setuptools import find_packages, setup

FOLDERS = {
    "agents": "orchestrator.agents",
    "skills": "orchestrator.skills",
    "migrations": "orchestrator.migrations",
}

packages = find_packages(include=["orchestrator", "orchestrator.*"])
for folder, name in FOLDERS.items():
    packages += [name] + [f"{name}.{sub}" for sub in find_packages(where=folder)]

setup(packages=packages, package_dir={name: folder for folder, name in FOLDERS.items()})
