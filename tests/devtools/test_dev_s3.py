"""``airflow-commit-dev dev-s3`` / ``python -m ...embedded_s3``: a real SeaweedFS run until stopped.

Each run is a real process: the test reads what it prints, uses the connection it prints, stops it
with a signal and then looks for what is left (a ``weed`` process, the data directory).
"""

from __future__ import annotations

import json
import os
import re
import selectors
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config

pytestmark = pytest.mark.slow

STARTUP_BOUND_SECONDS = 120.0
MODULE = [sys.executable, "-m", "airflow_commit_provider.devtools.embedded_s3"]
CLI = [str(Path(sys.executable).parent / "airflow-commit-dev"), "dev-s3"]


@dataclass
class DevS3:
    process: subprocess.Popen[bytes]
    lines: list[str]

    @property
    def connection(self) -> dict[str, Any]:
        line = next(line for line in self.lines if "AIRFLOW_CONN_AWS_DEFAULT=" in line)
        assignment = shlex.split(line)[-1]  # export AIRFLOW_CONN_AWS_DEFAULT='{...}'
        return json.loads(assignment.split("=", 1)[1])

    @property
    def endpoint(self) -> str:
        return next(line.split(": ", 1)[1] for line in self.lines if line.startswith("endpoint: "))

    @property
    def data_dir(self) -> Path:
        found = re.search(r"data in (\S+),", self.lines[0])
        assert found, self.lines[0]
        return Path(found.group(1))

    def client(self) -> Any:
        conn = self.connection
        return boto3.session.Session().client(
            "s3",
            endpoint_url=conn["extra"]["endpoint_url"],
            aws_access_key_id=conn["login"],
            aws_secret_access_key=conn["password"],
            region_name=conn["extra"]["region_name"],
            config=Config(s3={"addressing_style": "path"}),
        )

    def stop(self, signum: int) -> int:
        self.process.send_signal(signum)
        return self.process.wait(timeout=60)


def start(command: list[str]) -> DevS3:
    """Start it and read its output until it says how to stop it (it is then serving)."""
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert process.stdout is not None
    descriptor = process.stdout.fileno()
    output = b""
    deadline = time.monotonic() + STARTUP_BOUND_SECONDS
    with selectors.DefaultSelector() as selector:
        selector.register(descriptor, selectors.EVENT_READ)
        while b"\nStop with" not in output:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                process.send_signal(signal.SIGTERM)  # it stops its server; a SIGKILL would orphan it
                process.wait(timeout=60)
                pytest.fail(f"no connection printed within {STARTUP_BOUND_SECONDS:.0f} s: {output!r}")
            chunk = os.read(descriptor, 65536)
            if not chunk:
                pytest.fail(f"exited ({process.wait()}) before serving: {output!r}")
            output += chunk
    return DevS3(process, output.decode().splitlines())


def weed_processes(marker: str) -> list[int]:
    """Live `weed` processes whose command line mentions `marker` (the data directory)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if Path(command[0]).name == "weed" and any(marker in part for part in command) and state != "Z":
            found.append(int(entry.name))
    return found


def listening_addresses(pid: int) -> set[str]:
    """The local addresses of the TCP sockets `pid` listens on (hex, as /proc/net/tcp has them)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    addresses = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                addresses.add(fields[1].rsplit(":", 1)[0])
    return addresses


@pytest.fixture
def runs() -> Iterator[list[DevS3]]:
    started: list[DevS3] = []
    yield started
    for run in started:
        if run.process.poll() is None:
            run.stop(signal.SIGTERM)


def test_it_serves_until_stopped_and_keeps_its_data_in_dir(tmp_path: Path, runs: list[DevS3]) -> None:
    data_dir = tmp_path / "s3-data"
    first = start([*MODULE, "--dir", str(data_dir), "--bucket", "lake"])
    runs.append(first)
    assert first.data_dir == data_dir
    assert first.endpoint.startswith("http://127.0.0.1:")
    assert first.connection["extra"]["endpoint_url"] == first.endpoint
    [weed] = weed_processes(str(data_dir))
    assert listening_addresses(weed) == {"0100007F"}, "every port it listens on is 127.0.0.1's"
    client = first.client()
    client.put_object(Bucket="lake", Key="events/dt=2024-01-01/part-0.csv", Body=b"id\n1\n")
    client.close()
    assert first.stop(signal.SIGTERM) == 0
    assert weed_processes(str(data_dir)) == [], "stopping leaves no weed process"

    again = start([*CLI, "--dir", str(data_dir)])
    runs.append(again)
    assert again.connection == first.connection, "same endpoint and keys: the connection set stays valid"
    client = again.client()
    body = client.get_object(Bucket="lake", Key="events/dt=2024-01-01/part-0.csv")["Body"].read()
    client.close()
    assert body == b"id\n1\n"
    assert again.stop(signal.SIGINT) == 0
    assert weed_processes(str(data_dir)) == []
    assert (data_dir / "data").is_dir(), "the data stays in --dir"


def test_without_dir_its_data_goes_at_exit(runs: list[DevS3]) -> None:
    run = start(MODULE)
    runs.append(run)
    data_dir = run.data_dir
    assert data_dir.is_dir()
    assert run.stop(signal.SIGTERM) == 0
    assert not data_dir.exists()
    assert weed_processes(str(data_dir)) == []
