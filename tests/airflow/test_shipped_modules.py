"""The zip the committed operator ships to Spark (``--py-files``) holds exactly what Spark's driver and
executors import, and the package has no import loop.

What Spark runs is `spark/` (the writer, the data source, the tasks, the driver's table steps) and
what it imports, transitively. The import graph is grimp's (import-linter's, which `make lint` runs
the layer contract on): it counts function-local and ``TYPE_CHECKING`` imports too, so a module
imported only for a type annotation is shipped as well, and a loop made of them is still a loop.
"""

from __future__ import annotations

import zipfile
from pathlib import Path, PurePosixPath

import grimp
import pytest

import airflow_commit_provider.spark
from airflow_commit_provider.operators.submission import SHIPPED_SUBPACKAGES, build_py_files_zip

PACKAGE = "airflow_commit_provider"


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(PACKAGE, cache_dir=None)


def spark_side(graph: grimp.ImportGraph) -> set[str]:
    """Every module of `spark/`, and every module they import, with the packages they sit in."""
    entry_points = {m for m in graph.modules if m == f"{PACKAGE}.spark" or m.startswith(f"{PACKAGE}.spark.")}
    # `spark`'s lazy exports import their modules by name, which no import statement shows.
    entry_points |= set(airflow_commit_provider.spark._EXPORTS.values())
    imported = set(entry_points)
    for module in entry_points:
        imported |= graph.find_upstream_modules(module)
    # Importing a module imports every package above it.
    return {".".join(m.split(".")[:depth]) for m in imported for depth in range(1, m.count(".") + 2)}


def shipped(tmp_path: Path) -> set[str]:
    """The modules in the zip the operator builds, by name."""
    modules = set()
    for name in zipfile.ZipFile(build_py_files_zip(tmp_path)).namelist():
        path = PurePosixPath(name)
        assert path.suffix == ".py", name
        parts = path.with_suffix("").parts
        modules.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return modules


def test_the_shipped_zip_is_exactly_what_spark_imports(graph: grimp.ImportGraph, tmp_path: Path) -> None:
    needed, zipped = spark_side(graph), shipped(tmp_path)
    assert not needed - zipped, f"Spark imports modules the zip lacks: {sorted(needed - zipped)}"
    assert not zipped - needed, f"the zip ships modules Spark never imports: {sorted(zipped - needed)}"
    assert {m.split(".")[1] for m in zipped if m != PACKAGE} == set(SHIPPED_SUBPACKAGES)
    assert f"{PACKAGE}.core.committers.magic" in zipped  # the graph is the package's, not empty


def test_no_import_loop(graph: grimp.ImportGraph) -> None:
    loops = sorted(
        f"{importer} -> {imported}"
        for importer in graph.modules
        for imported in graph.find_modules_directly_imported_by(importer)
        if graph.chain_exists(importer=imported, imported=importer)
    )
    assert not loops, "imports that are part of a loop:\n" + "\n".join(loops)
