"""The reference pages' tables and examples, generated at build time from their one owner in the code.

- ``spark-confs``: the ``spark.airflow_commit.*`` keys, from ``spark/config.py`` (each ``CONF_*``
  constant and its ``#:`` comment), with the default of the committer option of the same name
  (``core.options.CommitOptions``) where there is one;
- ``environment-variables``: what a process reads from its environment to reach S3, from
  ``core.store.settings.ENVIRONMENT_SOURCES`` and the ``S3Settings`` field each variable fills;
- ``airflow-options``: the ``[airflow_commit]`` options, from the provider info's ``config`` when the
  provider declares it, else from the calls that read them (``conf.get("airflow_commit", ...)``);
- ``supported-matrix``: each dependency's range (``pyproject.toml``) beside the versions the
  compatibility run (``constraints/oldest.txt``) and the full suite (``constraints/newest.txt``)
  install; ``extras``: the optional dependencies;
- ``commit-formats-example``: a real job committed by the ``partitioned`` committer on the local
  store while the site builds, and the files it left: ``_SUCCESS``, the partition's ``_SUCCESS``,
  the outcome, the job record, and the file and partition lists (their Arrow schemas and rows).

Each directive writes reStructuredText and parses it in place, so the tables are ordinary docutils
tables and a change in the code changes the page at the next build.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import logging
import re
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.pycode import ModuleAnalyzer
from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "airflow_commit_provider"
PYPROJECT = ROOT / "pyproject.toml"
CONSTRAINTS = {"oldest": ROOT / "constraints" / "oldest.txt", "newest": ROOT / "constraints" / "newest.txt"}


def attribute_docs(module: str, owner: str = "") -> dict[str, str]:
    """The ``#:`` comments and attribute docstrings of `module` (of class `owner`, or module-level)."""
    docs = ModuleAnalyzer.for_module(module).find_attr_docs()
    return {
        name: " ".join(line.strip() for line in lines).strip()
        for (cls, name), lines in docs.items()
        if cls == owner
    }


def one_line(text: str) -> str:
    """A cell's text: a table cell holds one paragraph."""
    return " ".join(text.split())


def list_table(header: Sequence[str], rows: Iterable[Sequence[str]], widths: str = "auto") -> list[str]:
    lines = [".. list-table::", "   :header-rows: 1", f"   :widths: {widths}", ""]
    for row in [header, *rows]:
        first, *rest = row
        lines.append(f"   * - {one_line(first) or ' '}")
        lines.extend(f"     - {one_line(cell) or ' '}" for cell in rest)
    return lines


def literal(value: object) -> str:
    """``value`` as code; an empty value as the word "empty" (four backticks would read as a transition)."""
    return f"``{value}``" if str(value) else "empty"


class GeneratedDirective(SphinxDirective):
    """A directive whose content is reStructuredText made by `lines()`."""

    has_content = False

    def lines(self) -> list[str]:
        raise NotImplementedError

    def run(self) -> list[nodes.Node]:
        # The pages are MyST Markdown, whose nested parse reads Markdown: hand it the text in eval-rst.
        text = ["```{eval-rst}", *self.lines(), "```"]
        container = nodes.container()
        self.state.nested_parse(StringList(text, source=self.get_source_info()[0]), 0, container)
        return container.children


class SparkConfs(GeneratedDirective):
    def lines(self) -> list[str]:
        from airflow_commit_provider.core.options import CommitOptions
        from airflow_commit_provider.spark import config

        self.env.note_dependency(str(PACKAGE / "spark" / "config.py"))
        comments = attribute_docs(config.__name__)
        option_docs = attribute_docs("airflow_commit_provider.core.options", "CommitOptions")
        defaults = {f.name: f.default for f in dataclasses.fields(CommitOptions)}
        operator_set = set(config.OPERATOR_CONFS)
        rows = []
        for name, key in vars(config).items():
            if not name.startswith("CONF_") or not isinstance(key, str):
                continue
            option = key.removeprefix(config.PREFIX)
            text = comments.get(name) or option_docs.get(option, "")
            if option in defaults and defaults[option] is not None:
                text += f" Default: {literal(defaults[option])}."
            if key in operator_set:
                text += " Set by ``CommittedSparkSubmitOperator`` for each try; not for a user's ``conf``."
            rows.append((literal(key), text))
        return list_table(("Key", "What it sets"), rows, "35 65")


class EnvironmentVariables(GeneratedDirective):
    def lines(self) -> list[str]:
        from airflow_commit_provider.core.store import settings

        self.env.note_dependency(str(PACKAGE / "core" / "store" / "settings.py"))
        field_docs = attribute_docs(settings.__name__, "S3Settings")
        rows = [
            (
                ", ".join(literal(name) for name in variables),
                literal(field),
                field_docs.get(field, ""),
            )
            for field, variables in settings.ENVIRONMENT_SOURCES.items()
        ]
        return list_table(
            ("Variables (the first set wins)", "``S3Settings`` field", "Meaning"), rows, "30 20 50"
        )


def options_read_in_code() -> dict[str, list[str]]:
    """Every ``<x>.get("airflow_commit", "<option>", ...)`` in the package: option -> the modules."""
    found: dict[str, list[str]] = {}
    for source in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("get", "getint", "getboolean", "getfloat")
                and len(node.args) >= 2
                and all(isinstance(arg, ast.Constant) for arg in node.args[:2])
                and node.args[0].value == "airflow_commit"  # type: ignore[attr-defined]
            ):
                module = ".".join(source.relative_to(PACKAGE.parent).with_suffix("").parts)
                found.setdefault(str(node.args[1].value), []).append(module)  # type: ignore[attr-defined]
    return found


class AirflowOptions(GeneratedDirective):
    def lines(self) -> list[str]:
        from airflow_commit_provider.get_provider_info import get_provider_info

        declared: dict[str, Any] = get_provider_info().get("config", {})
        rows = []
        if declared:
            for section, body in declared.items():
                for option, spec in body.get("options", {}).items():
                    rows.append(
                        (
                            f"{literal(option)} ({literal(f'AIRFLOW__{section.upper()}__{option.upper()}')})",
                            str(spec.get("type", "")),
                            literal(spec.get("default")),
                            str(spec.get("description", "")),
                        )
                    )
            return list_table(("Option (environment variable)", "Type", "Default", "Description"), rows)
        for option, modules in sorted(options_read_in_code().items()):
            rows.append(
                (
                    f"{literal(option)} ({literal(f'AIRFLOW__AIRFLOW_COMMIT__{option.upper()}')})",
                    "read by " + ", ".join(literal(m) for m in sorted(set(modules))),
                )
            )
        return list_table(("Option (environment variable)", "Where the code reads it"), rows, "45 55")


def project_metadata() -> dict[str, Any]:
    import tomllib

    return dict(tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"])


def pinned(constraints: Path) -> tuple[str, dict[str, str]]:
    """The Python version a constraints file's header names, and its pins by normalised name."""
    from packaging.utils import canonicalize_name

    text = constraints.read_text(encoding="utf-8")
    python = re.search(r"\(Python (\d+\.\d+)\)", text)
    pins = {}
    for line in text.splitlines():
        name, separator, version = line.partition("==")
        if separator and not line.startswith("#"):
            pins[canonicalize_name(name)] = version.strip()
    return (python.group(1) if python else "?"), pins


class SupportedMatrix(GeneratedDirective):
    """Each runtime dependency and the user-facing extras' ones: supported range, oldest and newest tested."""

    USER_EXTRAS = ("spark", "hive", "crt", "embedded-s3")

    def lines(self) -> list[str]:
        from packaging.requirements import Requirement
        from packaging.utils import canonicalize_name

        for path in (PYPROJECT, *CONSTRAINTS.values()):
            self.env.note_dependency(str(path))
        project = project_metadata()
        (old_python, oldest), (new_python, newest) = (pinned(CONSTRAINTS[k]) for k in ("oldest", "newest"))
        rows = [("Python", literal(project["requires-python"]), old_python, new_python)]
        requirements = [(Requirement(r), "") for r in project["dependencies"]]
        for extra in self.USER_EXTRAS:
            requirements += [(Requirement(r), extra) for r in project["optional-dependencies"][extra]]
        for requirement, extra in requirements:
            name = canonicalize_name(requirement.name)
            label = literal(requirement.name) + (f" (``[{extra}]``)" if extra else "")
            # The lower bound first, as pyproject.toml writes it (packaging sorts them otherwise).
            specifier = ",".join(sorted(map(str, requirement.specifier), key=lambda spec: spec[0] != ">"))
            rows.append((label, literal(specifier), oldest.get(name, "-"), newest.get(name, "-")))
        return list_table(
            (
                "Dependency",
                "Supported (``pyproject.toml``)",
                "Oldest tested (``make compat``)",
                "Newest tested (``make test``)",
            ),
            rows,
            "30 30 20 20",
        )


class Extras(GeneratedDirective):
    def lines(self) -> list[str]:
        self.env.note_dependency(str(PYPROJECT))
        extras = project_metadata()["optional-dependencies"]
        rows = [
            (literal(f"airflow-commit-provider[{name}]"), ", ".join(literal(r) for r in reqs))
            for name, reqs in extras.items()
        ]
        return list_table(("Extra", "What it installs"), rows, "30 70")


JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number"}


def snake_case(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def field_table(document: dict[str, Any], cls: type) -> list[str]:
    """One row per top-level field of `document`, in its order, with the meaning `cls` documents for
    the field of the same name (camelCase in JSON, snake_case in Python)."""
    docs = attribute_docs(cls.__module__, cls.__name__)
    rows = []
    for key, value in document.items():
        name = snake_case(key)
        member = inspect.getattr_static(cls, name, None)
        meaning = docs.get(name) or (inspect.getdoc(member) if isinstance(member, property) else None)
        if key == "name":
            meaning = f"The format's name, always {literal(value)}: a reader refuses a file without it."
        rows.append((literal(key), JSON_TYPES.get(type(value), "null"), meaning or ""))
    return list_table(("Field", "JSON type", "Meaning"), rows, "25 15 60")


def json_block(title: str, text: str, cls: type | None = None) -> list[str]:
    """`text` (a JSON object) pretty-printed in its own field order, and its fields' table from `cls`."""
    document = json.loads(text)
    pretty = json.dumps(document, indent=2, ensure_ascii=False)
    lines = [
        f"**{title}**",
        "",
        ".. code-block:: json",
        "",
        *("   " + line for line in pretty.splitlines()),
        "",
    ]
    if cls is not None:
        lines += [*field_table(document, cls), ""]
    return lines


def table_block(title: str, table: Any) -> list[str]:
    """An Arrow table's schema (with field metadata) and rows, as a list table."""
    lines = [f"**{title}**", ""]
    schema_rows = [(literal(f.name), literal(f.type), "" if f.nullable else "not null") for f in table.schema]
    lines += [*list_table(("Column", "Arrow type", ""), schema_rows, "30 40 30"), ""]
    rows = [[literal(json.dumps(value, default=str)) for value in row.values()] for row in table.to_pylist()]
    lines += [*list_table(table.schema.names, rows), ""]
    return lines


class CommitFormatsExample(GeneratedDirective):
    """A real commit on the local store, and what it left."""

    JOB_ID = "job-docs-example"

    def lines(self) -> list[str]:
        quiet = logging.getLogger("airflow_commit_provider")
        level = quiet.level
        quiet.setLevel(logging.WARNING)  # the committer's progress lines are not the build's
        try:
            return self.commit_and_read()
        finally:
            quiet.setLevel(level)

    def commit_and_read(self) -> list[str]:
        import pyarrow.parquet as pq

        from airflow_commit_provider.core.committers import CommitOptions, create_committer
        from airflow_commit_provider.core.formats.outcome import JobOutcome
        from airflow_commit_provider.core.formats.success import SuccessData
        from airflow_commit_provider.core.layout import JobLayout
        from airflow_commit_provider.core.paths import StorePath
        from airflow_commit_provider.core.store import open_store

        with tempfile.TemporaryDirectory(prefix="airflow-commit-docs-") as root:
            destination = StorePath.parse(f"{root}/warehouse/events")
            store = open_store(destination)
            job = create_committer("partitioned", store, destination, self.JOB_ID, CommitOptions(threads=2))
            job.setup_job()
            results = []
            for task, day in enumerate(("dt=2024-01-01", "dt=2024-01-02")):
                attempt = job.task_attempt(task, 0)
                with attempt.create_file(f"{day}/part-00000-{self.JOB_ID}.csv") as stream:
                    stream.write(f"event_id,amount\n{day}-1,12.5\n{day}-2,3.0\n".encode())
                results.append(attempt.commit_task(rows=2))
            job.commit_job(results)
            layout = JobLayout(destination, self.JOB_ID)
            lines = [
                f"Written by a ``partitioned`` job ``{self.JOB_ID}`` of two tasks, one file each, "
                f"into ``{destination}`` (a temporary directory of the build).",
                "",
            ]
            lines += json_block("_SUCCESS", store.read_bytes(layout.success_marker).decode(), SuccessData)
            lines += json_block(
                "dt=2024-01-01/_SUCCESS", store.read_bytes(layout.partition_success("dt=2024-01-01")).decode()
            )
            lines += json_block(
                f"_airflow_commit/{self.JOB_ID}.outcome.json",
                store.read_bytes(layout.outcome).decode(),
                JobOutcome,
            )
            lines += json_block(
                f"_airflow_commit/{self.JOB_ID}.success.json (the job record)",
                store.read_bytes(layout.job_record).decode(),
                SuccessData,
            )
            for listed in sorted(Path(layout.lists_dir.key).glob("*.parquet")):
                lines += table_block(f"_airflow_commit/{self.JOB_ID}/{listed.name}", pq.read_table(listed))
            store.close()
        return lines


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("spark-confs", SparkConfs)
    app.add_directive("environment-variables", EnvironmentVariables)
    app.add_directive("airflow-options", AirflowOptions)
    app.add_directive("commit-formats-example", CommitFormatsExample)
    app.add_directive("supported-matrix", SupportedMatrix)
    app.add_directive("extras", Extras)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
