"""The deployment's virtualenv: Airflow, the postgres provider and a wheel built from this checkout.

What is slow (Airflow and PySpark from the registry) is cached outside the checkout, in
``~/.cache/airflow-commit-provider/venvs/deploy-<hash>``, keyed by what decides it: the
constraints file, the project's dependencies and the extras installed, the build tools, the Python
version. What is under test is not cached: every session builds the sdist and the wheel from the
checkout once (`build_distributions`, with the venv's own build tools: no download), the release
check (test_release.py) checks both, and the deployment reinstalls that wheel, non-editable and
without dependencies, so it always runs this checkout's code.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import NamedTuple

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[2]
CONSTRAINTS = REPO / "constraints" / "newest.txt"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "airflow-commit-provider" / "venvs"
#: What a deployment needs besides the provider: Airflow's PostgreSQL support.
DEPLOYMENT_PACKAGES = ("apache-airflow-providers-postgres", "psycopg2-binary")
#: A cold install downloads Airflow and PySpark: 3-5 minutes on a quiet host, once per key. A hang
#: guard only: with no pip cache, beside the other lanes and a load of 17-24, it passed 20 minutes.
INSTALL_BOUND_SECONDS = 2400
#: A cached venv of another key unused for this long is removed (each is about 1.3 GB).
STALE_SECONDS = 24 * 3600
#: The log of the venv's installs and the builds, in the work folder a session passes in.
SETUP_LOG = "deployment-venv.log"
#: The package's folder in the checkout (pyproject's [tool.setuptools.packages.find]).
PACKAGE = "airflow_commit_provider"


class DeploymentSetupError(RuntimeError):
    """The deployment's virtualenv could not be built."""


class Distributions(NamedTuple):
    """The checkout's sdist and the wheel built from it."""

    sdist: Path
    wheel: Path


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def _project() -> dict:
    return _pyproject()["project"]


def build_packages() -> list[str]:
    """The build backend ([build-system] requires) and the release extra's front-end and checker."""
    return [*_pyproject()["build-system"]["requires"], *_project()["optional-dependencies"]["release"]]


def build_sources() -> list[str]:
    """What a source tree needs to build the distributions: pyproject.toml, the files it names, the package."""
    project = _project()
    return ["pyproject.toml", project["readme"], *project["license-files"], PACKAGE]


def wheel_extras() -> list[str]:
    """The wheel's extras a Spark worker installs: ``spark`` (the full PySpark) when pyproject has it."""
    return [extra for extra in ("spark",) if extra in _project().get("optional-dependencies", {})]


def venv_key() -> str:
    """Changes exactly when the cached dependencies would: constraints, dependencies, extras, Python."""
    project = _project()
    extras = wheel_extras()
    decided_by = {
        "constraints": CONSTRAINTS.read_text(),
        "dependencies": project.get("dependencies", []),
        "extras": {name: project.get("optional-dependencies", {}).get(name) for name in extras},
        "deployment": DEPLOYMENT_PACKAGES,
        "build": build_packages(),
        "python": sys.version_info[:2],
    }
    return hashlib.sha256(json.dumps(decided_by, sort_keys=True).encode()).hexdigest()[:16]


def _run(command: list[str], log: Path, what: str, timeout: float = INSTALL_BOUND_SECONDS) -> None:
    with log.open("a") as out:
        out.write(f"$ {' '.join(command)}\n")
        out.flush()
        finished = subprocess.run(
            command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=timeout
        )
    if finished.returncode:
        tail = log.read_text(errors="replace")[-4000:]
        raise DeploymentSetupError(f"{what} failed (exit {finished.returncode}; log {log}):\n{tail}")


def build_distributions(out_dir: Path, log: Path, python: Path) -> Distributions:
    """The sdist and the wheel of the checkout, as a release builds them: ``python -m build`` makes the
    sdist from a copy of the sources, then the wheel from the sdist (so a file the sdist misses is
    missing from the wheel too). With `python`'s build tools, without isolation: no download.
    """
    source = out_dir / "source"
    source.mkdir(parents=True)
    for name in build_sources():
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, source / name)
    dist = out_dir / "dist"
    _run(
        [str(python), "-m", "build", "--no-isolation", "--outdir", str(dist), str(source)],
        log,
        "building the sdist and the wheel",
        timeout=300,
    )
    [sdist] = dist.glob("airflow_commit_provider-*.tar.gz")
    [wheel] = dist.glob("airflow_commit_provider-*.whl")
    return Distributions(sdist, wheel)


def _with_extras(wheel: Path) -> str:
    extras = wheel_extras()
    return f"airflow-commit-provider[{','.join(extras)}] @ {wheel.as_uri()}" if extras else str(wheel)


def cached_venv(work: Path) -> Path:
    """The cached virtualenv (Airflow, the provider's dependencies, the build tools); its directory.

    Made on first use of its key from a wheel of the checkout, with dependencies. The venv counts as
    built only once its stamp is written, after the last install step, so an interrupted install is
    rebuilt rather than taken for a finished one.
    """
    venv = CACHE / f"deploy-{venv_key()}"
    stamp = venv / "deployment-venv-complete"
    log = work / SETUP_LOG
    python = venv / "bin" / "python"
    if not stamp.exists():
        shutil.rmtree(venv, ignore_errors=True)
        venv.parent.mkdir(parents=True, exist_ok=True)
        _run([sys.executable, "-m", "venv", str(venv)], log, "creating the virtualenv")
        pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
        _run([*pip, *build_packages()], log, "installing the build tools")
        first = build_distributions(work / "first-build", log, python)
        _run(
            [*pip, "-c", str(CONSTRAINTS), _with_extras(first.wheel), *DEPLOYMENT_PACKAGES],
            log,
            "installing Airflow and the provider's dependencies",
        )
        stamp.write_text(venv_key())
    stamp.touch()  # its last use, which `_remove_stale` goes by
    _remove_stale(venv)
    return venv


def install_wheel(venv: Path, wheel: Path, log: Path) -> None:
    """Reinstall the provider in `venv` from `wheel`, non-editable, its dependencies as they are."""
    _run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-deps",
            "--force-reinstall",
            str(wheel),
        ],
        log,
        "installing the checkout's wheel",
        timeout=300,
    )


def _remove_stale(current: Path) -> None:
    """Remove the cached venvs of other keys (old dependencies) that no run has used for a day."""
    now = time.time()
    for other in current.parent.glob("deploy-*"):
        if other == current or not other.is_dir():
            continue
        stamp = other / "deployment-venv-complete"
        last_used = (stamp if stamp.exists() else other).stat().st_mtime
        if now - last_used > STALE_SECONDS:
            shutil.rmtree(other, ignore_errors=True)


def site_packages(venv: Path) -> Path:
    """The site-packages folder of `venv`."""
    [site] = (venv / "lib").glob("python*/site-packages")
    return site


def link_dependencies(venv: Path, requirements: Iterable[str], folder: Path) -> list[str]:
    """Link into `folder` what `venv` installed for `requirements` and everything they require in
    turn (extras and markers as pip follows them), and nothing else; the distributions linked, by
    name. A venv that lists `folder` in a ``.pth`` file then sees the dependencies pip would install
    for `requirements` with the constraints `venv` was built with, in the versions it resolved,
    without installing them again (about 750 MB for the provider's).

    A folder whose files all belong to those distributions is one link; a folder shared with others
    (``airflow/providers/``, which the deployment's PostgreSQL provider writes into too) is made
    here and its entries linked the same way. A link per file (24k for the provider's) took longer
    to make and delete on a busy host than the install it replaces.
    """
    site = site_packages(venv)
    installed = {
        canonicalize_name(dist.metadata["Name"]): dist for dist in metadata.distributions(path=[str(site)])
    }
    extras_of: dict[str, set[str]] = {}
    pending = _needed(requirements, set())
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if name not in installed:
            raise DeploymentSetupError(f"{venv} lacks {requirement.name}, a dependency of the provider")
        known = extras_of.get(name)
        if known is not None and requirement.extras <= known:
            continue
        extras = extras_of[name] = (known or set()) | requirement.extras
        pending += _needed(installed[name].requires or [], extras)
    root = _OwnedTree()
    for name, dist in installed.items():
        for file in dist.files or []:
            if file.parts[0] != "..":  # scripts, in bin/
                root.add(file.parts, name)
    root.link(site, folder, set(extras_of))
    return sorted(extras_of)


class _OwnedTree:
    """The files a venv's RECORDs list, as a tree: each node knows the distributions beneath it."""

    def __init__(self) -> None:
        self.owners: set[str] = set()
        self.children: dict[str, _OwnedTree] = {}

    def add(self, parts: tuple[str, ...], owner: str) -> None:
        self.owners.add(owner)
        if parts:
            self.children.setdefault(parts[0], _OwnedTree()).add(parts[1:], owner)

    def link(self, source: Path, target: Path, wanted: set[str]) -> None:
        """Link `source` at `target` if every owner is wanted; else link the wanted children."""
        if not self.owners & wanted or not source.exists():
            return
        if self.owners <= wanted or not self.children:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(source, target_is_directory=source.is_dir())
            return
        for name, child in self.children.items():
            child.link(source / name, target / name, wanted)


def _needed(requirements: Iterable[str], extras: set[str]) -> list[Requirement]:
    """The `requirements` (``Requires-Dist`` lines) pip installs on this Python with `extras` asked for."""
    needed = [Requirement(line) for line in requirements]
    return [
        requirement
        for requirement in needed
        if requirement.marker is None
        or any(requirement.marker.evaluate({"extra": extra}) for extra in {"", *extras})
    ]
