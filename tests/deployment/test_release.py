"""The release check: the sdist and the wheel a release would publish, checked as PyPI and a user meet them.

The session's distributions (conftest.py: ``python -m build``, the wheel made from the sdist) are the
ones the deployment installs. Here ``twine check`` refuses what PyPI would; the wheel's metadata and
files are compared with their owners in the checkout; and the wheel is installed, with its
dependencies as constraints/newest.txt pins them, into a fresh virtualenv, where Airflow lists it as
a provider. ``make release-check`` runs this file alone.

Cost: the fresh install is nearly all of it (about 750 MB from pip's cache, no byte-compiling:
90 s at load 7 on the 2-core host), then ``airflow providers list`` there (13 s).
"""

from __future__ import annotations

import email.parser
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator
from email.message import Message
from pathlib import Path

import pytest
from deployment_services import clean_environment
from deployment_venv import CONSTRAINTS, PACKAGE, REPO, Distributions, build_sources
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import airflow_commit_provider

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

DIST_NAME = "airflow-commit-provider"
#: The fresh venv's install and Airflow's first start there.
INSTALL_BOUND_SECONDS = 900


def _package_files() -> set[str]:
    """Every file of the checkout's package a user needs, as a path in the wheel (no bytecode)."""
    root = REPO / PACKAGE
    return {
        path.relative_to(REPO).as_posix()
        for path in root.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    }


def _wheel_metadata(wheel: zipfile.ZipFile) -> tuple[str, Message]:
    [dist_info] = {
        name.split("/")[0] for name in wheel.namelist() if name.split("/")[0].endswith(".dist-info")
    }
    return dist_info, email.parser.Parser().parsestr(wheel.read(f"{dist_info}/METADATA").decode())


def test_twine_check_passes(distributions: Distributions, deployment_venv: Path) -> None:
    """What PyPI's upload would check: metadata fields, the long description renders, --strict."""
    python = deployment_venv / "bin" / "python"
    done = subprocess.run(
        [str(python), "-m", "twine", "check", "--strict", str(distributions.sdist), str(distributions.wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_wheel_metadata_comes_from_its_owners(distributions: Distributions) -> None:
    """The version is ``__version__``; the licence, its files and the dependencies are pyproject's."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    with zipfile.ZipFile(distributions.wheel) as wheel:
        dist_info, metadata = _wheel_metadata(wheel)
        licences = {name: wheel.read(f"{dist_info}/licenses/{name}") for name in project["license-files"]}
        entry_points = wheel.read(f"{dist_info}/entry_points.txt").decode()
    assert metadata["Name"] == DIST_NAME
    assert metadata["Version"] == airflow_commit_provider.__version__
    assert distributions.wheel.name.startswith(
        f"airflow_commit_provider-{airflow_commit_provider.__version__}-"
    )
    assert distributions.sdist.name == f"airflow_commit_provider-{airflow_commit_provider.__version__}.tar.gz"
    assert metadata["License-Expression"] == project["license"] == "Apache-2.0"
    assert metadata.get_all("License-File") == project["license-files"]
    assert licences == {name: (REPO / name).read_bytes() for name in project["license-files"]}
    at_the_root = {path.name for pattern in ("LICENSE*", "NOTICE*") for path in REPO.glob(pattern)}
    assert at_the_root == {"LICENSE", "NOTICE"} <= set(licences), "every licence file ships in the wheel"
    assert set(metadata.get_all("Classifier") or []) == set(project["classifiers"])
    unconditional = {
        canonicalize_name(Requirement(line).name)
        for line in metadata.get_all("Requires-Dist") or []
        if Requirement(line).marker is None or "extra" not in str(Requirement(line).marker)
    }
    assert unconditional == {canonicalize_name(Requirement(line).name) for line in project["dependencies"]}
    assert "[apache_airflow_provider]" in entry_points
    assert "provider_info = airflow_commit_provider.get_provider_info:get_provider_info" in entry_points


def test_distributions_ship_every_package_file(distributions: Distributions) -> None:
    """Every module, template, type marker and Java source of the package is in the sdist and in the
    wheel built from it (a package-data pattern that misses a new file fails here)."""
    expected = _package_files()
    with zipfile.ZipFile(distributions.wheel) as wheel:
        in_wheel = {name for name in wheel.namelist() if name.startswith(f"{PACKAGE}/")}
    with tarfile.open(distributions.sdist) as sdist:
        # Each member is "airflow_commit_provider-<version>/<path>".
        in_sdist = {member.name.split("/", 1)[1] for member in sdist.getmembers() if member.isfile()}
    assert (sorted(expected - in_wheel), sorted(in_wheel - expected)) == ([], []), "(missing, unexpected)"
    beside_the_package = set(build_sources()) - {PACKAGE}  # pyproject.toml, the readme, LICENSE, NOTICE
    assert sorted((expected | beside_the_package) - in_sdist) == []


@pytest.fixture
def fresh_venv() -> Iterator[Path]:
    """An empty virtualenv under /tmp, deleted afterwards (its install is about 750 MB)."""
    work = Path(tempfile.mkdtemp(prefix="airflow-release-check-"))
    try:
        subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True, timeout=120)
        yield work / "venv"
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_wheel_installs_into_a_fresh_venv_and_lists_as_a_provider(
    distributions: Distributions, fresh_venv: Path
) -> None:
    """As a platform team installs it: the wheel with its dependencies (pinned by the constraints the
    suite runs on), then ``pip check`` and ``airflow providers list`` in that venv alone."""
    bin_dir = fresh_venv / "bin"
    pip = [str(bin_dir / "python"), "-m", "pip", "--disable-pip-version-check", "--no-input"]
    install = subprocess.run(
        [*pip, "install", "--no-compile", "-c", str(CONSTRAINTS), str(distributions.wheel)],
        capture_output=True,
        text=True,
        timeout=INSTALL_BOUND_SECONDS,
    )
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    check = subprocess.run([*pip, "check"], capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout + check.stderr

    home = fresh_venv.parent / "airflow-home"
    env = {**clean_environment(), "AIRFLOW_HOME": str(home), "PATH": f"{bin_dir}:/usr/bin:/bin"}
    listed = subprocess.run(
        [str(bin_dir / "airflow"), "providers", "list", "--output", "json"],
        capture_output=True,
        text=True,
        env=env,
        cwd=fresh_venv.parent,
        timeout=INSTALL_BOUND_SECONDS,
    )
    assert listed.returncode == 0, listed.stdout[-3000:] + listed.stderr[-3000:]
    providers = {entry["package_name"]: entry for entry in json.loads(listed.stdout)}
    assert DIST_NAME in providers, sorted(providers)
    assert providers[DIST_NAME]["version"] == airflow_commit_provider.__version__
    # The provider came from the fresh venv's own install, not from this checkout.
    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import airflow_commit_provider as p; print(p.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=fresh_venv.parent,
        timeout=120,
    )
    assert Path(where.stdout.strip()).is_relative_to(fresh_venv), where.stdout + where.stderr
