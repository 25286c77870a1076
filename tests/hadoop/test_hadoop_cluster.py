"""The test YARN + HDFS cluster (devtools/hadoop_cluster.py): up when `start()` returns, HDFS
serving files over WebHDFS and YARN with a RUNNING NodeManager, nothing listening beyond loopback,
and nothing left once stopped (checked by the session's `hadoop_cluster` fixture when it stops
the cluster: tests/conftest.py).

Cost: the session's cluster (about 15-30 s to start on the shared 2 cores, 450 MB RSS).
"""

from __future__ import annotations

import getpass
import subprocess
import uuid

import requests

from airflow_commit_provider.devtools.hadoop_cluster import HadoopCluster


def _listening_addresses(pid: int) -> list[str]:
    """The local address of every TCP socket process `pid` listens on (from ``ss``)."""
    listing = subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True, check=True).stdout
    return [line.split()[3] for line in listing.splitlines() if f"pid={pid}," in line]


def test_hdfs_serves_a_file_over_webhdfs(hadoop_cluster: HadoopCluster) -> None:
    path = f"{hadoop_cluster.webhdfs_url}/webhdfs/v1/tests/{uuid.uuid4().hex}/hello.txt"
    body = b"written through the NameNode, stored on the DataNode\n"
    user = getpass.getuser()  # the cluster's superuser (it runs as this user), as spark-submit is
    # CREATE answers 307 to the DataNode, which requests follows with the same PUT and body.
    created = requests.put(path, params={"op": "CREATE", "user.name": user}, data=body, timeout=60)
    assert created.status_code == 201, created.text

    read = requests.get(path, params={"op": "OPEN", "user.name": user}, timeout=60)
    assert read.status_code == 200, read.text
    assert read.content == body
    status = requests.get(path, params={"op": "GETFILESTATUS"}, timeout=60).json()["FileStatus"]
    assert (status["length"], status["replication"]) == (len(body), 1)


def test_namenode_metrics_count_each_call_as_it_is_made(hadoop_cluster: HadoopCluster) -> None:
    """What the HDFS benchmark counts NameNode calls with: the namesystem's counters
    (``NameNodeActivity``) include calls made just before the read, whatever route they came by;
    the RPC server's per-method counters count a WebHDFS request as an external call, not as the
    RPC method it runs."""
    rpc_bean = f"RpcDetailedActivityForPort{hadoop_cluster.namenode_rpc_port}"
    root = f"{hadoop_cluster.webhdfs_url}/webhdfs/v1/"
    namesystem, rpc = (
        hadoop_cluster.namenode_metrics("NameNodeActivity"),
        hadoop_cluster.namenode_metrics(rpc_bean),
    )
    for _ in range(3):
        status = requests.get(
            root, params={"op": "GETFILESTATUS", "user.name": getpass.getuser()}, timeout=60
        )
        assert status.status_code == 200, status.text
    namesystem_after = hadoop_cluster.namenode_metrics("NameNodeActivity")
    rpc_after = hadoop_cluster.namenode_metrics(rpc_bean)
    assert namesystem_after["FileInfoOps"] - namesystem["FileInfoOps"] == 3
    assert rpc_after.get("GetFileInfoNumOps", 0) == rpc.get("GetFileInfoNumOps", 0)
    assert rpc_after["(external)NumOps"] - rpc.get("(external)NumOps", 0) == 3
    assert rpc_after["SendHeartbeatNumOps"] >= 1  # the DataNode's, by RPC: the bean is the live one


def test_yarn_has_two_running_node_managers_on_two_hosts(hadoop_cluster: HadoopCluster) -> None:
    """MiniYARNCluster's NodeManager on "localhost" and the launcher's second one on 127.0.0.2:
    two hosts to Spark (which runs a speculative copy of a task only on another host than its
    attempts'), the second with room for one executor and not for an application master of 2g."""
    nodes = requests.get(f"{hadoop_cluster.rm_webapp_url}/ws/v1/cluster/nodes", timeout=30).json()
    by_host = {node["nodeHostName"]: node for node in nodes["nodes"]["node"]}
    assert sorted(by_host) == ["127.0.0.2", "localhost"]
    assert [node["state"] for node in by_host.values()] == ["RUNNING", "RUNNING"], nodes
    assert by_host["localhost"]["availMemoryMB"] >= 2048  # an application master and one 512m executor fit
    assert by_host["127.0.0.2"]["availMemoryMB"] == 1024


def test_client_configuration_names_the_running_servers(hadoop_cluster: HadoopCluster) -> None:
    conf_dir = hadoop_cluster.conf_dir
    assert sorted(path.name for path in conf_dir.iterdir()) == [
        "core-site.xml",
        "hdfs-site.xml",
        "yarn-site.xml",
    ]
    assert hadoop_cluster.env() == {"HADOOP_CONF_DIR": str(conf_dir)}
    assert hadoop_cluster.fs_default_name.startswith("hdfs://127.0.0.1:")
    assert hadoop_cluster.rm_address.startswith("127.0.0.1:")
    info = requests.get(f"{hadoop_cluster.rm_webapp_url}/ws/v1/cluster/info", timeout=30).json()
    assert info["clusterInfo"]["state"] == "STARTED"


def test_every_listening_socket_is_on_loopback(hadoop_cluster: HadoopCluster) -> None:
    assert hadoop_cluster.pid is not None
    addresses = _listening_addresses(hadoop_cluster.pid)
    ports = {address.rpartition(":")[2] for address in addresses}
    # NameNode RPC and HTTP, the ResourceManager's RPC and web: among them, and none beyond loopback.
    for address in (hadoop_cluster.fs_default_name, hadoop_cluster.webhdfs_url, hadoop_cluster.rm_address):
        assert address.rpartition(":")[2] in ports
    assert len(addresses) >= 10  # the DataNode's and the NodeManager's too
    loopback = (
        "127.0.0.1:",
        "[::ffff:127.0.0.1]:",
        "127.0.0.2:",
        "[::ffff:127.0.0.2]:",
    )  # the second NodeManager
    assert [a for a in addresses if not a.startswith(loopback)] == []
