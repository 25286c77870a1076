"""Fuzz target: `airflow-commit` command lines, parsed and their scope checked (never run: the
commands delete). A usage error is one line on stderr ending in a pointer to --help, exit 2."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st
from support.fuzzing import FUZZ, accepted_or_refused, hostile_text, parsed_command_line

from airflow_commit_provider.cleanup.scope import ScopeError
from airflow_commit_provider.cli import build_parser
from airflow_commit_provider.cli.arguments import scope_argument, scope_of

COMMANDS = (
    ["uploads", "list"],
    ["uploads", "abort"],
    ["temp", "list"],
    ["temp", "clean"],
    ["records", "list"],
    ["records", "prune"],
    ["records", "reindex"],
    ["success", "verify"],
    ["success", "show"],
    ["doctor"],
    ["report"],
    ["bogus"],
)
FLAGS = (
    "--older-than",
    "--job-id",
    "--threads",
    "--min-files",
    "--newer-than",
    "--committer",
    "--partition",
    "--writers",
    "--dry-run",
    "--allow-bucket-root",
    "--json",
    "-o",
    "--output",
    "--aws-conn-id",
    "--endpoint-url",
)
arguments = st.one_of(
    st.sampled_from(FLAGS), hostile_text, st.sampled_from(("s3://bucket/table", "1d", "7", "-1"))
)


@FUZZ
@given(st.sampled_from(COMMANDS), st.lists(arguments, max_size=6))
@example(["uploads", "list"], ["s3://bucket/t", "x\ny"])
@example(["success", "verify"], ["s3://bucket/t", "--newer-than", "9" * 400 + "s"])
def test_command_lines(command: list[str], rest: list[str]) -> None:
    args = parsed_command_line(build_parser(), [*command, *rest])
    if args is not None and getattr(args, "allow_bucket_root", None) is not None:
        accepted_or_refused(lambda: scope_of(args), ScopeError, scope_argument(args)[0])
