"""`airflow-commit`: list and abort pending uploads, clean temporary trees, check `_SUCCESS`, prune job records,
report commits.

Destructive commands ask first (like `hadoop s3guard uploads -abort` without `-force`) and
refuse when nobody can answer. Errors are one line on stderr with exit status 2; a failed
verification or a declined prompt exits 1; `--json` output is for machines; progress bars are
drawn only on a terminal. S3 settings follow boto3's environment (`AWS_ENDPOINT_URL`, ...).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from itertools import islice
from typing import Any, NoReturn, TypeVar

from airflow_commit_provider.core.cleanup import (
    DEFAULT_MAX_JOB_DURATION,
    DEFAULT_OLDER_THAN,
    DEFAULT_RECORDS_OLDER_THAN,
    NoProgress,
    Progress,
    abort_uploads,
    clean_temp_trees,
    find_job_records,
    find_temp_trees,
    format_duration,
    format_size,
    list_pending_uploads,
    parse_duration,
    parse_scope,
    prune_records,
    reindex_records,
)
from airflow_commit_provider.core.formats.errors import InvalidCommitDataError
from airflow_commit_provider.core.formats.success import (
    SUCCESS_FILENAME,
    LegacySuccessMarkerError,
    SuccessData,
)
from airflow_commit_provider.core.listed_files import FilesCheck, check_listed_files
from airflow_commit_provider.core.paths import StorePath
from airflow_commit_provider.core.store import Store, StoreError, open_store
from airflow_commit_provider.core.store.check import (
    COMMIT_PROPERTIES,
    CONDITIONAL_CREATE,
    PROPERTIES,
    check_store,
)
from airflow_commit_provider.core.success_check import (
    SuccessCheck,
    SuccessExpectations,
    is_legacy,
    success_path,
)

PROG = "airflow-commit"
T = TypeVar("T")


class CliError(Exception):
    """A user-facing failure: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """Errors end with a pointer to --help. The shared parent parsers are of this class too:
    subcommands are built from the root parser's class, and their parents must match it."""

    def error(self, message: str) -> NoReturn:
        # One line, as every error here: argparse quotes some arguments, not unrecognised ones.
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see --help)\n")


def _duration(text: str) -> Any:
    try:
        return parse_duration(text, "--older-than")
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error).split(": ", 1)[1]) from error


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number (0 or more), got {text!r}")
    return int(text)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("--endpoint-url", help="S3 endpoint (overrides AWS_ENDPOINT_URL)")
    common.add_argument("--json", action="store_true", help="machine-readable JSON on stdout")
    common.add_argument("--threads", type=_positive, default=16, help="parallel requests (default 16)")
    scoped = _scoped_parser(common, DEFAULT_OLDER_THAN)
    destructive = _Parser(add_help=False)
    destructive.add_argument(
        "--dry-run", action="store_true", help="report what would be done, change nothing"
    )
    destructive.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")

    parser = _Parser(prog=PROG, description=__doc__.split("\n", 1)[0])
    groups = parser.add_subparsers(
        dest="group", required=True, metavar="{uploads,temp,success,records,report,doctor,dev-s3}"
    )

    uploads = groups.add_parser("uploads", help="pending multipart uploads").add_subparsers(
        dest="command", required=True
    )
    listing = uploads.add_parser("list", parents=[scoped], help="list pending uploads with their sizes")
    listing.set_defaults(handler=_uploads_list)
    abort = uploads.add_parser("abort", parents=[scoped, destructive], help="abort pending uploads")
    abort.add_argument(
        "--sizes",
        action="store_true",
        help="measure parts and bytes first; one more request per upload (a dry run always measures)",
    )
    abort.set_defaults(handler=_uploads_abort)

    temp = groups.add_parser("temp", help="temporary trees of failed jobs").add_subparsers(
        dest="command", required=True
    )
    nested = _Parser(add_help=False)
    nested.add_argument("--nested", action="store_true", help="also search below subdirectories")
    temp.add_parser("list", parents=[scoped, nested], help="list temporary trees").set_defaults(
        handler=_temp_list
    )
    temp.add_parser(
        "clean", parents=[scoped, nested, destructive], help="delete stale temporary trees"
    ).set_defaults(handler=_temp_clean)

    success = groups.add_parser("success", help="_SUCCESS files").add_subparsers(
        dest="command", required=True
    )
    show = success.add_parser("show", parents=[common], help="show a _SUCCESS file")
    show.add_argument("url", help="output directory or its _SUCCESS file")
    show.add_argument(
        "--job-id", help="show this job: its record when _SUCCESS is absent or names another job"
    )
    show.set_defaults(handler=_success_show)
    verify = success.add_parser("verify", parents=[common], help="check a _SUCCESS file (exit 1 if not)")
    verify.add_argument("url", help="output directory or its _SUCCESS file")
    verify.add_argument(
        "--job-id", help="the job that must have committed (its record counts when _SUCCESS is another job's)"
    )
    verify.add_argument("--min-files", type=int, metavar="N", help="at least N files committed")
    verify.add_argument(
        "--committer", action="append", metavar="NAME", help="expected committer (repeat for any of)"
    )
    verify.add_argument("--newer-than", type=_duration, metavar="DURATION", help="written within DURATION")
    verify.add_argument("--partition", action="append", metavar="P", help="a partition that must be listed")
    verify.add_argument("--allow-legacy", action="store_true", help="accept a 0-byte classic marker")
    verify.add_argument(
        "--files",
        action="store_true",
        help="also check that every listed file is there with its size: one listing of the "
        "directory merged with the job's file list (no request per file)",
    )
    verify.set_defaults(handler=_success_verify)

    records = groups.add_parser(
        "records", help="per-job commit records under <destination>/_airflow_commit/"
    ).add_subparsers(dest="command", required=True)
    aged = _scoped_parser(common, DEFAULT_RECORDS_OLDER_THAN)
    policy = _Parser(add_help=False)
    policy.add_argument(
        "--keep-newest",
        type=_count,
        default=0,
        metavar="N",
        help="also keep the N newest of the jobs older than --older-than (default 0)",
    )
    policy.add_argument(
        "--max-job-duration",
        type=_duration,
        default=DEFAULT_MAX_JOB_DURATION,
        metavar="DURATION",
        help="the longest a job runs; --older-than may not be shorter, so that no abort outcome "
        f"still fencing an orphaned driver goes (default {format_duration(DEFAULT_MAX_JOB_DURATION.total_seconds())})",
    )
    records.add_parser(
        "list", parents=[aged, policy], help="list jobs with records, and which may go"
    ).set_defaults(handler=_records_list)
    records.add_parser(
        "prune",
        parents=[aged, policy, destructive],
        help="delete every file of the jobs older than --older-than but the --keep-newest newest, "
        "and index the jobs kept that lack an index entry",
    ).set_defaults(handler=_records_prune)
    reindex = records.add_parser(
        "reindex",
        parents=[common],
        help="write the records index entries that decided jobs lack (jobs from before the index)",
    )
    reindex.add_argument("url", help="the destination: s3://bucket/prefix, file:///path or a path")
    reindex.add_argument(
        "--allow-bucket-root", action="store_true", help="allow a destination that is a whole bucket"
    )
    reindex.add_argument(
        "--dry-run", action="store_true", help="report which jobs lack an entry, write nothing"
    )
    reindex.set_defaults(handler=_records_reindex)

    doctor = groups.add_parser(
        "doctor",
        parents=[common],
        help="check that a store has what the committers rely on (exit 1 on any FAIL)",
        description="Probe the store under a scratch prefix of DESTINATION (removed afterwards): "
        + ", ".join(PROPERTIES),
    )
    doctor.add_argument(
        "url", metavar="DESTINATION", help="an output directory: s3://bucket/prefix, file:///path"
    )
    doctor.add_argument(
        "--writers", type=_positive, default=8, help="concurrent creates per race (default 8)"
    )
    doctor.add_argument("--rounds", type=_positive, default=3, help="races to run (default 3)")
    doctor.set_defaults(handler=_doctor)

    report = groups.add_parser(
        "report",
        parents=[common],
        help="what a commit did: its tasks, job-commit phases and partitions, read from its records",
    )
    _report_arguments(report).set_defaults(handler=_report)

    dev_s3 = groups.add_parser(
        "dev-s3",
        help="run the embedded S3 (SeaweedFS) on 127.0.0.1 until Ctrl-C, for development",
        description="Run the embedded S3 on 127.0.0.1 until Ctrl-C or SIGTERM, and print the Airflow "
        "connection to set (with this local server's secret key).",
    )
    _dev_s3_arguments(dev_s3).set_defaults(handler=_dev_s3)
    return parser


def _report_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    from airflow_commit_provider.report.command import add_arguments

    return add_arguments(parser, positive=_positive)


def _report(args: argparse.Namespace) -> int:
    from airflow_commit_provider.report.command import run

    return run(args, _open(args, args.url))


def _dev_s3_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    from airflow_commit_provider.devtools.embedded_s3 import add_arguments

    return add_arguments(parser)


def _dev_s3(args: argparse.Namespace) -> int:
    from airflow_commit_provider.devtools.embedded_s3 import serve

    return serve(args.dir, args.port, args.bucket)


def _scoped_parser(common: _Parser, default_age: Any) -> _Parser:
    """The arguments of every listing: a directory, an age (with its own default), a job."""
    scoped = _Parser(add_help=False, parents=[common])
    scoped.add_argument("url", help="directory: s3://bucket/prefix, s3a://..., file:///path or a path")
    default_text = format_duration(default_age.total_seconds())
    scoped.add_argument(
        "--older-than",
        type=_duration,
        default=default_age,
        metavar="DURATION",
        help=f"only what is at least this old: 90s, 15m, 6h, 2d (default {default_text})",
    )
    scoped.add_argument("--job-id", help="only what belongs to this job")
    scoped.add_argument(
        "--allow-bucket-root", action="store_true", help="allow a scope that is a whole bucket"
    )
    return scoped


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, or a usage error already printed as one line
        return exit_.code if isinstance(exit_.code, int) else 2
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        _fail("interrupted")
        return 130
    except Exception as error:  # every failure is one line; no tracebacks for users
        known = (CliError, ValueError, OSError, StoreError)
        message = str(error) if isinstance(error, known) else f"{type(error).__name__}: {error}"
        _fail(message)
        return 2


def _fail(message: str) -> None:
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)


# Shared plumbing --------------------------------------------------------------------------
def _open(args: argparse.Namespace, url: str) -> Store:
    options = {"endpoint_url": args.endpoint_url} if args.endpoint_url else {}
    return open_store(StorePath.parse(url), threads=args.threads, **options)


def _scope(args: argparse.Namespace) -> StorePath:
    """Validate the URL before opening anything, naming it as the user typed it."""
    return parse_scope(args.url, argument="URL", allow_bucket_root=args.allow_bucket_root)


def _emit(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=False, default=str))


@contextmanager
def _progress(args: argparse.Namespace) -> Iterator[Progress]:
    """Rich bars when stdout is a terminal and the output is for humans, otherwise nothing."""
    if args.json or not sys.stdout.isatty():
        yield NoProgress()
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        _rate_column(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bars:
        yield _RichProgress(bars)


def _rate_column() -> Any:
    """Items per second (rich's own speed column is for bytes)."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text("" if task.speed is None else f"{task.speed:,.0f}/s", style="progress.data.speed")

    return RateColumn()


class _RichProgress:
    def __init__(self, bars: Any) -> None:
        self._bars = bars
        self._task: Any = None

    def start(self, description: str, total: int | None) -> None:
        if self._task is not None:
            self._bars.update(self._task, visible=False)
        self._task = self._bars.add_task(description, total=total)

    def advance(self, amount: int = 1) -> None:
        if self._task is not None:
            self._bars.advance(self._task, amount)


def _confirm_possible(args: argparse.Namespace, action: str) -> None:
    """Refuse up front when a prompt would be needed but nobody can answer it."""
    if not args.dry_run and not args.yes and not sys.stdin.isatty():
        raise CliError(
            f"refusing to {action} without confirmation: stdin is not a terminal; "
            "pass --yes to proceed or --dry-run to preview"
        )


def _confirm(args: argparse.Namespace, question: str) -> bool:
    if args.yes:
        return True
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _age_text(args: argparse.Namespace) -> str:
    return format_duration(args.older_than.total_seconds())


#: Items shown before asking, and in a dry run's output (both end with how many more there are).
_ASK_PREVIEW, _DRY_RUN_PREVIEW = 20, 50


def _selection(args: argparse.Namespace) -> dict[str, Any]:
    """The options every listing takes from the command line; the scope is validated here too."""
    return {
        "scope": _scope(args),
        "older_than": args.older_than,
        "job_id": args.job_id,
        "allow_bucket_root": args.allow_bucket_root,
        "threads": args.threads,
    }


def _print_table(
    items: Iterable[T], count: int, header: str, row: Callable[[T], str], limit: int | None
) -> None:
    """A header and a row for each of the first `limit` of `count` items (all without one), then how
    many more. The items are streamed: a listing can be a million long."""
    shown = items if limit is None else islice(items, limit)
    for index, item in enumerate(shown):
        if index == 0:
            print(header)
        print(row(item))
    if limit is not None and count > limit:
        print(f"... and {count - limit} more")


def _emit_streamed(summary: dict[str, Any], key: str, items: Iterable[dict[str, Any]]) -> None:
    """`summary` with `key` listing `items` as one JSON document, written as the items come (one a
    line), so that a million of them are never one string in memory."""
    head = json.dumps(summary, indent=2, default=str)
    print(head[: head.rindex("}")].rstrip() + ("," if summary else "") + f"\n  {json.dumps(key)}: [")
    previous = None  # each line but the last ends with a comma, so it is printed once the next one is known
    for item in items:
        if previous is not None:
            print(f"    {previous},")
        previous = json.dumps(item, default=str)
    if previous is not None:
        print(f"    {previous}")
    print("  ]\n}")


def _show(
    args: argparse.Namespace,
    find: Callable[[argparse.Namespace, Store, Progress], Any],
    describe: Callable[[Any], None],
    emit: Callable[[Any], None],
) -> int:
    """The flow of the list commands: list with progress bars, then JSON (`emit`) or `describe` for people."""
    with _open(args, args.url).session() as store, _progress(args) as progress:
        listing = find(args, store, progress)
    try:
        if args.json:
            emit(listing)
        else:
            describe(listing)
    finally:
        listing.close()
    return 0


def _list_confirm_act(
    args: argparse.Namespace,
    *,
    action: str,
    find: Callable[[argparse.Namespace, Store, Progress], Any],
    targets: Callable[[Any], tuple[Iterable[Any], int]],
    preview: Callable[[Iterable[Any], int, int], None],
    question: Callable[[Any], str],
    declined: str,
    act: Callable[..., Any],
) -> int:
    """The flow of the destructive commands: list, show and ask (unless --dry-run or --yes), act.

    Refuses before listing when a prompt would be needed that nobody can answer. Exits 1 when the
    user declines or anything failed. The closing line for people is what the report says of
    itself; failures follow it on stderr, one line each. Interrupted (Ctrl-C), it says that what
    was done stays done and that the same command finishes the rest.
    """
    _scope(args)
    _confirm_possible(args, action)
    with _open(args, args.url).session() as store:
        with _progress(args) as progress:
            listing = find(args, store, progress)
        try:
            chosen, count = targets(listing)
            if count and not args.dry_run and not args.yes:
                preview(chosen, count, _ASK_PREVIEW)
                if not _confirm(args, question(listing)):
                    print(declined, file=sys.stderr)
                    return 1
            try:
                with _progress(args) as progress:
                    report = act(
                        store,
                        listing,
                        dry_run=args.dry_run,
                        threads=args.threads,
                        progress=progress,
                        keep_outcomes=args.json,
                    )
            except KeyboardInterrupt:
                _fail(f"interrupted: what was done stays done; run the same command again to {action} left")
                return 130
            try:
                return _report_act(args, report, targets, preview)
            finally:
                report.close()
        finally:
            listing.close()


def _report_act(
    args: argparse.Namespace,
    report: Any,
    targets: Callable[[Any], tuple[Iterable[Any], int]],
    preview: Callable[[Iterable[Any], int, int], None],
) -> int:
    """Print what a destructive command did: JSON with every outcome, or the preview (dry run),
    the closing line and each listed failure for people. 1 when anything failed."""
    summary = report.to_json()
    if args.json:
        _emit_streamed(summary, report.DETAILS, (outcome.to_json() for outcome in report.outcomes))
    else:
        if args.dry_run:
            preview(*targets(report.listing), _DRY_RUN_PREVIEW)
        print(report.describe())
        for failure in summary["failures"]:  # what names the item (URL, or key and upload ID), then why
            where = " ".join(str(value) for key, value in failure.items() if key != "error")
            print(f"FAILED {where}: {failure['error']}", file=sys.stderr)
    return 1 if report.count("failed") else 0


# uploads ----------------------------------------------------------------------------------
def _list_uploads(args: argparse.Namespace, store: Store, progress: Progress) -> Any:
    return list_pending_uploads(store, progress=progress, **_selection(args))


def _list_uploads_to_abort(args: argparse.Namespace, store: Store, progress: Progress) -> Any:
    """Sizes cost a request per upload: measured for a dry run or with --sizes only."""
    sizes = args.sizes or args.dry_run
    return list_pending_uploads(store, progress=progress, sizes=sizes, **_selection(args))


def _print_uploads(uploads: Iterable[Any], count: int, limit: int | None = None) -> None:
    _print_table(
        uploads,
        count,
        f"{'INITIATED':<25} {'AGE':>7} {'PARTS':>5} {'SIZE':>10}  KEY  UPLOAD-ID",
        _upload_row,
        limit,
    )


def _upload_row(upload: Any) -> str:
    initiated = datetime.fromtimestamp(upload.initiated, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    return (
        f"{initiated:<25} {format_duration(upload.age_seconds):>7} {_or_dash(upload.parts):>5} "
        f"{'-' if upload.bytes is None else format_size(upload.bytes):>10}  {upload.path.key}  {upload.upload_id}"
    )


def _or_dash(value: int | None) -> str:
    return "-" if value is None else str(value)


def _uploads_list(args: argparse.Namespace) -> int:
    def describe(listing: Any) -> None:
        _print_uploads(listing.uploads, listing.count)
        print(
            f"{listing.count} pending uploads older than {_age_text(args)} under {listing.scope}: "
            f"{format_size(listing.total_bytes)} in {listing.total_parts} parts "
            f"({listing.too_recent} more recent, {listing.other_jobs} of other jobs, "
            f"{listing.committing} of jobs past their commit point)"
        )

    def emit(listing: Any) -> None:
        _emit_streamed(listing.summary_json(), "uploads", (u.to_json() for u in listing.uploads))

    return _show(args, _list_uploads, describe, emit)


def _uploads_abort(args: argparse.Namespace) -> int:
    return _list_confirm_act(
        args,
        action="abort uploads",
        find=_list_uploads_to_abort,
        targets=lambda listing: (listing.uploads, listing.count),
        preview=_print_uploads,
        question=lambda listing: (
            f"Abort {listing.count} uploads "
            f"({'size not measured' if listing.total_bytes is None else format_size(listing.total_bytes)}) under "
            f"{listing.scope} older than {_age_text(args)}?"
        ),
        declined="Nothing aborted.",
        act=abort_uploads,
    )


# temp -------------------------------------------------------------------------------------
def _find_trees(args: argparse.Namespace, store: Store, progress: Progress) -> Any:
    return find_temp_trees(store, nested=args.nested, progress=progress, **_selection(args))


def _print_trees(trees: Iterable[Any], count: int, limit: int | None = None) -> None:
    _print_table(
        trees,
        count,
        f"{'STATE':<7} {'AGE':>7} {'FILES':>6} {'SIZE':>10} {'UPLOADS':>7}  TREE",
        _tree_row,
        limit,
    )


def _tree_row(tree: Any) -> str:
    age = "-" if tree.age_seconds is None else format_duration(tree.age_seconds)
    state = "stale" if tree.stale else "commit" if tree.committing else "active"
    return f"{state:<7} {age:>7} {tree.files:>6} {format_size(tree.bytes):>10} {tree.uploads:>7}  {tree.path}"


def _temp_list(args: argparse.Namespace) -> int:
    def describe(listing: Any) -> None:
        _print_trees(listing.trees, listing.count)
        print(
            f"{listing.count} temporary trees under {listing.scope}; {listing.stale_count} stale "
            f"(no writes for {_age_text(args)}): {format_size(listing.stale_bytes)} "
            f"in {listing.stale_files} files; {listing.kept_committing} kept for jobs past their commit point"
        )

    def emit(listing: Any) -> None:
        _emit_streamed(listing.summary_json(), "trees", (tree.to_json() for tree in listing.trees))

    return _show(args, _find_trees, describe, emit)


def _temp_clean(args: argparse.Namespace) -> int:
    return _list_confirm_act(
        args,
        action="delete temporary trees",
        find=_find_trees,
        targets=lambda listing: (listing.stale(), listing.stale_count),
        preview=_print_trees,
        question=lambda listing: (
            f"Delete {listing.stale_count} stale temporary trees "
            f"({format_size(listing.stale_bytes)} in {listing.stale_files} files) under {listing.scope}?"
        ),
        declined="Nothing deleted.",
        act=clean_temp_trees,
    )


# success ----------------------------------------------------------------------------------
def _success_json(url: StorePath, data: SuccessData, source: str = SUCCESS_FILENAME) -> dict[str, Any]:
    return {
        "url": str(url),
        "source": source,
        "legacy": is_legacy(data),
        "success": data.success,
        "state": data.state,
        "description": data.description,
        **data.summary(),
    }


def _missing(path: StorePath, found: SuccessCheck) -> str:
    """Why nothing was found, starting as the CLI always has: `no _SUCCESS at ...`."""
    return "; ".join([f"no _SUCCESS at {path}", *found.reasons[1:]])


def _found_note(found: SuccessCheck, path: StorePath) -> str:
    """Says so when the job's record stands in for a `_SUCCESS` that is absent or another job's."""
    return f" (job record; {path} is absent or names another job)" if found.from_record else ""


def _success_show(args: argparse.Namespace) -> int:
    path = success_path(args.url)
    with _open(args, args.url).session() as store:
        found = SuccessExpectations(job_id=args.job_id, allow_legacy=True).check(store, path)
    data = found.data
    if found.state == "missing" or data is None:
        raise CliError(_missing(path, found))
    if args.job_id and not found.from_record and data.job_id != args.job_id:
        raise CliError("; ".join(found.reasons))
    if args.json:
        _emit(_success_json(found.path, data, found.source))
        return 0
    if is_legacy(data):
        print(f"{path}: legacy 0-byte marker (classic FileOutputCommitter), written {data.date}")
        return 0
    summary = data.summary()
    partitions = data.partitions
    rows = [
        ("committer", data.committer),
        ("job ID", f"{data.job_id} ({data.job_id_source})" if data.job_id_source else data.job_id),
        ("written", f"{data.date} on {data.hostname}"),
        ("state", f"{data.state or '-'} ({'success' if data.success else 'FAILED'})"),
        ("files", str(summary["files"])),
        ("bytes", format_size(data.total_bytes) if data.total_bytes is not None else "?"),
        ("rows", "?" if data.rows is None else str(data.rows)),
        (
            "partitions",
            f"{data.total_partitions}: {', '.join(partitions[:10])}"
            f"{' ...' if data.total_partitions > min(len(partitions), 10) else ''}",
        ),
        ("description", data.description),
    ]
    print(f"{found.path}{_found_note(found, path)}")
    for label, value in rows:
        print(f"  {label:<12} {value}")
    return 0


def _success_verify(args: argparse.Namespace) -> int:
    path = success_path(args.url)
    found: SuccessCheck | None = None
    files: FilesCheck | None = None
    with _open(args, args.url).session() as store:
        try:
            newer = None if args.newer_than is None else datetime.now(timezone.utc) - args.newer_than
            expectations = SuccessExpectations.build(
                job_id=args.job_id,
                committers=args.committer,
                min_files=args.min_files,
                newer_than=newer,
                required_partitions=args.partition,
                allow_legacy=args.allow_legacy,
            )
            found = expectations.check(store, path)
            reasons = list(found.reasons)
            if found.state == "missing":
                reasons = [f"{_missing(path, found)}: the job has not committed (or wrote elsewhere)"]
            elif args.files and found.data is not None:
                try:
                    files = _check_files(args, store, found, found.data)
                except InvalidCommitDataError as error:
                    reasons.append(f"cannot check the files: {' '.join(str(error).split())}")
                else:
                    reasons += _files_reasons(files)
        except LegacySuccessMarkerError:
            reasons = [
                "_SUCCESS is a legacy 0-byte marker with no job details (pass --allow-legacy to accept)"
            ]
        except InvalidCommitDataError as error:
            reasons = [f"unreadable: {' '.join(str(error).split())}"]
    data = None if found is None or found.state == "missing" else found.data
    checked = path if found is None else found.path
    if args.json:
        _emit(
            {
                "url": str(path),
                "checked": str(checked),
                "ok": not reasons,
                "reasons": reasons,
                "success": None
                if data is None or found is None
                else _success_json(checked, data, found.source),
                **({"files": files.to_json() if files else None} if args.files else {}),
            }
        )
        return 1 if reasons else 0
    if reasons:
        print(f"FAILED {checked}")
        for reason in reasons:
            print(f"  - {reason}")
    else:
        assert data is not None and found is not None
        print(
            f"OK {checked}: job {data.job_id or '-'} by {data.committer or 'legacy committer'}, "
            f"{data.date}{_found_note(found, path)}"
        )
    if files is not None:
        print(f"  files: {files.describe()}")
        if files.unlisted_examples:
            more = files.unlisted - len(files.unlisted_examples)
            print(
                f"  not listed: {', '.join(files.unlisted_examples)}{f' and {more:,} more' if more else ''}"
            )
    return 1 if reasons else 0


def _check_files(
    args: argparse.Namespace, store: Store, found: SuccessCheck, data: SuccessData
) -> FilesCheck:
    """`--files`: every file the judged `_SUCCESS` (or record) lists, against one listing."""
    if is_legacy(data):
        raise InvalidCommitDataError(f"{found.path}: a 0-byte marker lists no files to check")
    with _progress(args) as progress:
        return check_listed_files(store, data, found.directory, source=str(found.path), progress=progress)


def _files_reasons(files: FilesCheck) -> list[str]:
    """A failed `--files` check as reasons: one a problem up to `PROBLEM_LINES`, then a count."""
    if files.ok:
        return []
    more = (
        [f"... and {files.problems_left_out:,} more missing or of another size"]
        if files.problems_left_out
        else []
    )
    return [*files.problems, *more]


# records ----------------------------------------------------------------------------------
def _find_records(args: argparse.Namespace, store: Store, progress: Progress) -> Any:
    return find_job_records(
        store,
        progress=progress,
        keep_newest=args.keep_newest,
        max_job_duration=args.max_job_duration,
        **_selection(args),
    )


def _print_jobs(jobs: Iterable[Any], count: int, limit: int | None = None) -> None:
    _print_table(
        jobs,
        count,
        f"{'STATE':<11} {'AGE':>7} {'FILES':>5} {'SIZE':>10}  {'KINDS':<25} JOB",
        _job_row,
        limit,
    )


def _job_row(job: Any) -> str:
    state = "prunable" if job.stale else f"kept:{job.keep}"
    kinds = ",".join(job.kinds)
    return (
        f"{state:<11} {format_duration(job.age_seconds):>7} {len(job.files):>5} {format_size(job.bytes):>10}  "
        f"{kinds:<25} {job.job_id}{'  (' + job.error + ')' if job.error else ''}"
    )


def _records_list(args: argparse.Namespace) -> int:
    def describe(listing: Any) -> None:
        _print_jobs(listing.jobs, len(listing.jobs))
        print(
            f"{len(listing.jobs)} jobs with records in {listing.records_dir}; {len(listing.stale)} may go "
            f"({format_size(sum(job.bytes for job in listing.stale))}); kept: "
            f"{len(listing.kept('recent'))} younger than {_age_text(args)}, {len(listing.kept('newest'))} of the "
            f"newest, {len(listing.kept('committing'))} committing, {len(listing.kept('unreadable'))} unreadable; "
            f"{sum(job.unindexed for job in listing.jobs)} without an index entry"
        )

    return _show(args, _find_records, describe, lambda listing: _emit(listing.to_json()))


def _records_prune(args: argparse.Namespace) -> int:
    return _list_confirm_act(
        args,
        action="prune job records",
        find=_find_records,
        targets=lambda listing: (listing.stale, len(listing.stale)),
        preview=_print_jobs,
        question=lambda listing: (
            f"Prune the records of {len(listing.stale)} jobs older than {_age_text(args)}"
            f"{f' (keeping the {args.keep_newest} newest of those)' if args.keep_newest else ''} "
            f"in {listing.records_dir}?"
        ),
        declined="Nothing pruned.",
        act=prune_records,
    )


def _records_reindex(args: argparse.Namespace) -> int:
    _scope(args)
    with _open(args, args.url).session() as store, _progress(args) as progress:
        report = reindex_records(
            store,
            args.url,
            dry_run=args.dry_run,
            allow_bucket_root=args.allow_bucket_root,
            threads=args.threads,
            progress=progress,
        )
    if args.json:
        _emit(report.to_json())
    else:
        print(report.describe())
        for job_id, error in sorted(report.errors.items()):
            print(f"FAILED {job_id}: {error}", file=sys.stderr)
    return 1 if report.errors else 0


# doctor -----------------------------------------------------------------------------------
def _doctor(args: argparse.Namespace) -> int:
    destination = StorePath.parse(args.url)
    if args.writers < 2:
        raise CliError("--writers must be at least 2 to race")
    with _open(args, args.url).session() as store:
        report = check_store(store, destination, writers=args.writers, rounds=args.rounds)
    if args.json:
        _emit(
            {
                "store": report.store,
                "scratch": str(report.scratch),
                "ok": report.passed,
                "requests": report.requests,
                "note": report.note,
                "checks": [{"property": c.name, "ok": c.passed, "reason": c.reason} for c in report.checks],
            }
        )
        return 0 if report.passed else 1
    from rich.console import Console
    from rich.markup import escape

    console = Console(highlight=False, soft_wrap=True)
    console.print(f"store: {escape(report.store)} (scratch {escape(str(report.scratch))}, removed)")
    if report.note:
        console.print(f"note: {escape(report.note)}")
    width = max(len(name) for name in PROPERTIES)
    for check in report.checks:
        verdict = "[green]PASS[/green]" if check.passed else "[bold red]FAIL[/bold red]"
        console.print(f"{verdict}  {check.name:<{width}}  {escape(check.reason)}")
    failed = sum(not check.passed for check in report.checks)
    console.print(f"{len(report.checks)} properties, {failed} failed, {report.requests} requests")
    unsafe = [check.name for check in report.checks if check.name in COMMIT_PROPERTIES and not check.passed]
    if unsafe:
        console.print(
            f"the committers rely on {' and '.join(COMMIT_PROPERTIES)}: commits on this store are not safe "
            f"({', '.join(unsafe)} failed); job setup refuses a store that fails {CONDITIONAL_CREATE}"
        )
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
