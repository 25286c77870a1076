"""How every command answers: one-line errors; `-o json|yaml|plain` documents and listings (streamed,
as a listing can be a million items long); tables, progress bars at a terminal and the confirmation
prompt of the destructive commands for people (`-o table`).

The machine formats carry the same data: what `-o json` prints, `-o yaml` prints as YAML, and
`-o plain` as tab-separated lines (a listing's items under a header line of their fields, or a single
record's fields one a line; a nested value as its JSON).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from typing import Any, Generic, TypeVar

from airflow_commit_provider.cli.arguments import CliError
from airflow_commit_provider.cli.names import PROG
from airflow_commit_provider.progress import NoProgress, Progress

T = TypeVar("T")


def fail(message: str, prog: str = PROG) -> None:
    print(f"{prog}: error: {' '.join(message.split())}", file=sys.stderr)


def for_machines(args: argparse.Namespace) -> bool:
    """Whether the command answers in a machine format (-o json, yaml or plain) rather than for people."""
    return bool(args.output != "table")


def emit(data: dict[str, Any], args: argparse.Namespace) -> None:
    """One document in the command's machine format."""
    data = _as_json(data)
    if args.output == "yaml":
        print(_yaml(data), end="")
    elif args.output == "plain":
        for key, value in data.items():
            print(f"{key}\t{_plain(value)}")
    else:
        print(json.dumps(data, indent=2))


def emit_streamed(
    summary: dict[str, Any], key: str, items: Iterable[dict[str, Any]], args: argparse.Namespace
) -> None:
    """`summary` with `key` listing `items` as one document, written as the items come, so that a
    million of them are never one string in memory. `-o plain` prints the items alone."""
    if args.output == "plain":
        _plain_rows(items)
    elif args.output == "yaml":
        _yaml_streamed(_as_json(summary), key, items)
    else:
        _json_streamed(summary, key, items)


def _as_json(data: Any) -> Any:
    """The data as its JSON says it (dates, paths and the like as text), for every format alike."""
    return json.loads(json.dumps(data, default=str))


def _yaml(data: Any) -> str:
    import yaml

    return str(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def _plain(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return " ".join(str(value).split())  # a field is one line, with no tab in it


def _plain_rows(items: Iterable[dict[str, Any]]) -> None:
    fields: list[str] | None = None
    for item in items:
        item = _as_json(item)
        if fields is None:
            fields = list(item)
            print("\t".join(fields))
        print("\t".join(_plain(item.get(name)) for name in fields))


def _yaml_streamed(summary: dict[str, Any], key: str, items: Iterable[dict[str, Any]]) -> None:
    if summary:
        print(_yaml(summary), end="")
    print(f"{key}:", end="")  # a listing's key is a plain word (`uploads`, `trees`, `jobs`)
    empty = True
    for item in items:
        if empty:
            print()
            empty = False
        print(_yaml([_as_json(item)]), end="")
    if empty:
        print(" []")


def _json_streamed(summary: dict[str, Any], key: str, items: Iterable[dict[str, Any]]) -> None:
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


@dataclass(frozen=True)
class Table(Generic[T]):
    """How a command shows items to people: a header, then a line an item."""

    header: str
    row: Callable[[T], str]

    def print(self, items: Iterable[T], count: int = 0, limit: int | None = None) -> None:
        """The header and a row for each of the first `limit` of `count` items (all without one),
        then how many more. The items are streamed: a listing can be a million long."""
        shown = items if limit is None else islice(items, limit)
        for index, item in enumerate(shown):
            if index == 0:
                print(self.header)
            print(self.row(item))
        if limit is not None and count > limit:
            print(f"... and {count - limit} more")


@contextmanager
def progress_for(args: argparse.Namespace) -> Iterator[Progress]:
    """Rich bars when stdout is a terminal and the output is for humans, otherwise nothing."""
    if for_machines(args) or not sys.stdout.isatty():
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


def confirm_possible(args: argparse.Namespace, action: str) -> None:
    """Refuse up front when a prompt would be needed but nobody can answer it."""
    if not args.dry_run and not args.yes and not sys.stdin.isatty():
        raise CliError(
            f"refusing to {action} without confirmation: stdin is not a terminal; "
            "pass --yes to proceed or --dry-run to preview"
        )


def confirm(args: argparse.Namespace, question: str) -> bool:
    if args.yes:
        return True
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")
