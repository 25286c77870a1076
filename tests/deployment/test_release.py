"""The release check: the sdist and the wheel a release would publish, checked as PyPI and a user meet them.

The session's distributions (conftest.py: ``python -m build``, the wheel made from the sdist) are the
ones the deployment installs. Here ``twine check`` refuses what PyPI would; the wheel's metadata and
files are compared with their owners in the checkout; and the wheel is installed into a fresh
virtualenv that sees its dependencies as constraints/newest.txt pins them and nothing else, where
``pip check`` passes and Airflow lists it as a provider. ``make release-check`` runs this file alone.

The dependencies are not installed again: pip resolved and installed them, with the wheel's own
``Requires-Dist`` and the same constraints, when it built the cached deployment venv
(deployment_venv.py, keyed by both), and the fresh venv sees exactly the files of that install's
closure of the wheel's requirements (`link_dependencies`). Installing them again (about 750 MB from
pip's cache: 61 s of CI run 4's side lane, about 250 s of CPU) proved nothing more.

Cost: about 17 s of CPU, 9 s of it ``airflow providers list`` in the fresh venv.
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
from deployment_venv import PACKAGE, REPO, Distributions, build_sources, link_dependencies, site_packages
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
def fresh_venv(distributions: Distributions, deployment_venv: Path) -> Iterator[Path]:
    """An empty virtualenv under /tmp (no pip of its own: the deployment venv's pip works on it with
    ``--python``) whose ``.pth`` names a folder of links to the wheel's dependencies as the cached
    deployment venv installed them (`link_dependencies`): not the provider, nor what the deployment
    adds (PostgreSQL's provider, the build tools); deleted afterwards."""
    work = Path(tempfile.mkdtemp(prefix="airflow-release-check-"))
    try:
        venv = work / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
        with zipfile.ZipFile(distributions.wheel) as wheel:
            _dist_info, wheel_metadata = _wheel_metadata(wheel)
        dependencies = work / "dependencies"
        linked = link_dependencies(
            deployment_venv, wheel_metadata.get_all("Requires-Dist") or [], dependencies
        )
        assert canonicalize_name(DIST_NAME) not in linked
        (site_packages(venv) / "dependencies.pth").write_text(f"{dependencies}\n")
        yield venv
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_wheel_installs_into_a_fresh_venv_and_lists_as_a_provider(
    distributions: Distributions, deployment_venv: Path, fresh_venv: Path
) -> None:
    """As a platform team installs it: the wheel into a venv holding its dependencies (pinned by the
    constraints the suite runs on), then ``pip check`` and ``airflow providers list`` in that venv alone."""
    python = fresh_venv / "bin" / "python"
    pip = [
        str(deployment_venv / "bin" / "python"),
        "-m",
        "pip",
        "--python",
        str(python),
        "--disable-pip-version-check",
        "--no-input",
    ]
    install = subprocess.run(
        [*pip, "install", "--no-deps", "--no-compile", str(distributions.wheel)],
        capture_output=True,
        text=True,
        timeout=INSTALL_BOUND_SECONDS,
    )
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    # Every installed distribution's requirements met: the wheel's by its linked dependencies.
    check = subprocess.run([*pip, "check"], capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout + check.stderr

    home = fresh_venv.parent / "airflow-home"
    env = {**clean_environment(), "AIRFLOW_HOME": str(home), "PATH": f"{python.parent}:/usr/bin:/bin"}
    listed = subprocess.run(
        [str(python), "-m", "airflow", "providers", "list", "--output", "json"],
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
    # The provider, its code and its metadata (whose entry point Airflow found), came from the fresh
    # venv's own install, not from this checkout or the deployment venv.
    where = subprocess.run(
        [
            str(python),
            "-c",
            "import airflow_commit_provider as p, importlib.metadata as m; "
            f"print(p.__file__); print(m.distribution({DIST_NAME!r}).locate_file(''))",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=fresh_venv.parent,
        timeout=120,
    )
    assert where.returncode == 0, where.stdout + where.stderr
    module, distribution = where.stdout.split()
    assert Path(module).is_relative_to(fresh_venv), where.stdout + where.stderr
    assert Path(distribution).resolve() == site_packages(fresh_venv).resolve(), where.stdout + where.stderr
