"""Atheris target: `airflow-commit` command lines (NUL-separated arguments, as argv can hold no
NUL), parsed and their scope checked, never run (the commands delete). A usage error is one line
on stderr ending in a pointer to --help, exit 2."""

from __future__ import annotations

from support.fuzzing import accepted_or_refused, parsed_command_line, text_of

from airflow_commit_provider.cleanup.scope import ScopeError
from airflow_commit_provider.cli import build_parser
from airflow_commit_provider.cli.arguments import scope_argument, scope_of

MAX_LEN = 512
#: Built once: parsing leaves a parser as it was, and building one per input would be most of the work.
PARSER = build_parser()


def TestOneInput(data: bytes) -> None:
    args = parsed_command_line(PARSER, text_of(data).split("\x00"))
    if args is not None and getattr(args, "allow_bucket_root", None) is not None:
        accepted_or_refused(lambda: scope_of(args), ScopeError, scope_argument(args)[0])
