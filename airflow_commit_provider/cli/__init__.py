"""`airflow-commit` and `airflow commit-protocols` (Airflow 3.2+): list and abort pending uploads, clean
temporary trees, check `_SUCCESS`, prune job records, report commits, check a store.

Destructive commands ask first (like `hadoop s3guard uploads -abort` without `-force`) and
refuse when nobody can answer. Errors are one line on stderr with exit status 2; a failed
verification or a declined prompt exits 1; `-o json|yaml|plain` output is for machines; progress
bars are drawn only on a terminal. S3 settings come from an Airflow connection (`--aws-conn-id`)
or boto3's environment (`AWS_ENDPOINT_URL`, ...).

`definition` declares every command once, for both programs (and the CLI reference); `runner` runs
one; `names` holds the words they share. One module a command group (`uploads`, `temp`, `success`, `records`, `doctor`, `report`),
imported only when one of its commands runs; the three cleanups share one flow (`cli.cleanup`);
`arguments` and `output` hold what every group's handlers share.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_commit_provider.cli.definition import build_parser

__all__ = ["build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """`airflow-commit`: parse, then run the command (`runner`, imported once a command line parses)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:  # --help, --version, or a usage error already printed as one line
        return exit_.code if isinstance(exit_.code, int) else 2
    from airflow_commit_provider.cli.runner import run

    return run(args)
