"""What every fuzz target (tests/fuzz) shares: its budget, its one rule, and its inputs.

The rule (issue 21): a parser or validator given anything either succeeds or raises the error type
it documents, with a one-line message that names the input (the argument, file or key). Any other
exception, a multi-line message or one that does not say what was wrong is a finding.

The budget is ``FUZZ_EXAMPLES`` examples per target: small by default (50), so the suite's bounded
fuzz stops by itself within seconds; ``make fuzz`` raises it for a campaign. Each target's
executions, and what came of them, are counted here for the campaign's report
(tests/fuzz/conftest.py).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

T = TypeVar("T")

#: Examples per target: CI's bounded fuzz, unless ``make fuzz`` (FUZZ_EXAMPLES, 20,000 by default)
#: asks for more. 50 keeps every target and its kept @example cases running in the suite, whose
#: budget is 25 minutes on 2 cores; the campaign, not the suite, is what searches (it was 150).
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "50"))

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,  # no timed tests: a slow example on a loaded machine is not a finding
    database=None,  # crashers are kept as explicit @example cases, not in a local directory
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)

#: Per target (pytest node ID): how many executions accepted the input and how many refused it.
OUTCOMES: defaultdict[str, Counter[str]] = defaultdict(Counter)


def count(outcome: str) -> None:
    """One more execution of the running target (its pytest node ID) that was `outcome`."""
    OUTCOMES[os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0]][outcome] += 1


def accepted_or_refused(
    call: Callable[[], T], documented: type[BaseException] | tuple[type[BaseException], ...], *names: str
) -> T | None:
    """`call()`'s result, or None when it raised `documented` with a one-line message containing
    one of `names` (the input, or the argument or file it came from). Anything else propagates or
    fails the example."""
    try:
        result = call()
    except documented as error:
        count("refused")
        message = str(error)
        assert message and "\n" not in message and "\r" not in message, f"not one line: {message!r}"
        assert any(name in message for name in names), f"names none of {names}: {message!r}"
        return None
    count("accepted")
    return result


#: A job ID as documented, spelled independently of core/layout's own pattern.
USABLE_JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}", re.ASCII)

#: Write options as Spark users type them (`df.write.option`), documented spellings.
WRITE_OPTION_NAMES = (
    "maxRecordsPerFile",
    "maxBytesPerFile",
    "compression",
    "codec",
    "header",
    "lineSep",
    "encoding",
    "charset",
    "pretty",
    "sep",
    "parquet.block.size",
    "orc.stripe.size",
    "threads",
    "part_size",
    "parts_in_flight",
    "allow_unsafe_v2",
    "skip_cleanup",
    "local_staging_dir",
    "s3.endpoint_url",
    "s3.verify",
)
#: What a refused commit option (`commit_options`) may be named by, beyond the write's own keys.
COMMIT_OPTION_NAMES = ("threads", "part_size", "parts_in_flight", "allow_unsafe_v2", "skip_cleanup")


def write_option_names(options: Iterable[str], conf: Iterable[str]) -> list[str]:
    """The names a refused write (`parse_options`) may give: a conf key, or an option key as given,
    folded or documented (keys are case-insensitive), or the option names its checks spell."""
    spellings = {name.lower(): name for name in WRITE_OPTION_NAMES}
    shown = [*conf, "option", "lineSep", "maxRecordsPerFile"]
    return shown + [
        spelling for key in options for spelling in (key, key.lower(), spellings.get(key.lower(), key))
    ]


def parsed_command_line(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace | None:
    """`argv` parsed by the CLI's `parser`, or None when it refused it as the CLI documents: exit 2
    with one line on stderr that ends in a pointer to --help (or exit 0 after printing help)."""
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        try:
            args = parser.parse_args(argv)
        except SystemExit as exit_:
            count("refused")
            message = stderr.getvalue()
            assert exit_.code == 0 or (exit_.code == 2 and message.count("\n") == 1), message
            assert exit_.code == 0 or message.endswith("(see --help)\n"), message
            return None
    count("accepted")
    return args


def text_of(data: bytes) -> str:
    """A coverage-guided fuzzer's bytes as the text a parser is handed: UTF-8, with lone surrogates
    where the bytes encode them (surrogatepass) or are not UTF-8 at all (surrogateescape, as
    `os.fsdecode` reads a file name or argument)."""
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return data.decode("utf-8", "surrogateescape")


# Inputs -----------------------------------------------------------------------------------------
#: Text as hostile input arrives: any code point (controls, surrogates, newlines) and the ASCII
#: troublemakers, often enough that a bounded run meets them.
hostile_text = st.text(
    st.one_of(
        st.characters(codec=None),
        st.sampled_from("\n\r\t\x00 /.-_:%#?[]{}\\\"'=*~\u2028\ufeff"),
    ),
    max_size=40,
)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    hostile_text,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(hostile_text, inner, max_size=4),
    max_leaves=12,
)


def encoded(value: Any) -> bytes:
    """JSON as Python writes it (NaN and Infinity included, as a careless writer would)."""
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


@st.composite
def mutated(draw: st.DrawFn, document: Any, changes: int = 3) -> Any:
    """`document` with up to `changes` values anywhere in it replaced by arbitrary JSON, removed, or
    (in a list) duplicated: the damage a forged or half-written file does to its fields."""
    document = json.loads(json.dumps(document))
    for _ in range(draw(st.integers(1, changes))):
        parent, key = _place(draw, document)
        action = draw(st.sampled_from(("replace", "remove", "duplicate")))
        if action == "remove" and isinstance(parent, dict):
            parent.pop(key, None)
        elif action == "duplicate" and isinstance(parent, list) and parent:
            parent.append(parent[key])
        else:
            parent[key] = draw(json_values)
    return document


def _place(draw: st.DrawFn, node: Any) -> tuple[Any, Any]:
    """A (container, key or index) somewhere in `node`, found by walking down from the top."""
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            return node, draw(hostile_text) if isinstance(node, dict) else 0
        key = draw(st.sampled_from(keys))
        child = node[key]
        if isinstance(child, (dict, list)) and child and draw(st.booleans()):
            node = child
            continue
        return node, key


#: The range positions in stored bytes are drawn from (then taken modulo the file's length).
POSITIONS = 1 << 20


def stored_bytes(valid: bytes, document: Any) -> st.SearchStrategy[bytes]:
    """What a reader may find where `valid` should be: it damaged field by field, truncated, with
    a byte flipped, a different JSON value, or any bytes at all."""
    # Positions are drawn from a fixed range and taken modulo the length: `valid` differs in length
    # from one example to the next (its job's random IDs), and a draw whose bounds depend on it
    # makes Hypothesis refuse to replay the example (FlakyStrategyDefinition).
    size = max(len(valid), 1)
    return st.one_of(
        mutated(document).map(encoded),
        st.integers(0, POSITIONS).map(lambda end: valid[: end % size]),
        json_values.map(encoded),
        st.binary(max_size=200),
        st.tuples(st.integers(0, POSITIONS), st.integers(0, 255)).map(
            lambda flip: valid[: flip[0] % size] + bytes([flip[1]]) + valid[flip[0] % size + 1 :]
        ),
    )
