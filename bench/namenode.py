"""What a stretch of work asked of the NameNode, counted by the NameNode itself: its metrics
(`HadoopCluster.namenode_metrics`, the JMX servlet) read before and after, in a run where nothing
else uses the cluster.

A call reaches the NameNode by one of two routes, and two sets of counters see them differently:

- **The namesystem's counters** (``NameNodeActivity``): one per operation, whichever route it came
  by. Hadoop's client (Spark's DFSClient) calls by RPC; WebHDFS (our store) by HTTP, and the
  NameNode's WebHDFS handler calls the same methods of its RPC server in process, which count the
  same. They name creates, renames, listings, deletes, file infos, block lookups and added blocks;
  ``mkdirs`` and ``complete`` have no counter.
- **The client RPC port's per-method counters** (``RpcDetailedActivityForPort<port>``): every call
  the RPC server handled, by method. Hadoop's committers make all their calls by RPC. The NameNode
  runs each WebHDFS request through the same server's queue as an "external call", counted as the
  method ``(external)``: that is our store's requests to the NameNode, counted by the NameNode. The
  rest of ours are the DataNode's own DFSClient creating, adding the block to and completing each
  file we write through it (CREATE's second step) and locating the blocks of each file we read
  (OPEN's), on our behalf. The DataNodes' protocol (heartbeats, block reports) shares the port and
  is left out.

So `NameNodeCalls.total` is every call the NameNode served for the work, on either route.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow_commit_provider.devtools.hadoop_cluster import HadoopCluster

NAMESYSTEM_BEAN = "NameNodeActivity"
#: Each kind of operation and the namesystem counter that counts one per call.
NAMESYSTEM_OPERATIONS = {
    "creates": "CreateFileOps",
    "renames": "FilesRenamed",
    "listings": "GetListingOps",
    "deletes": "DeleteFileOps",
    "file infos": "FileInfoOps",
    "block lookups": "GetBlockLocations",
    "blocks added": "AddBlockOps",
}
#: The DataNodes' own RPCs to the NameNode (DatanodeProtocol), not a client's.
DATANODE_METHODS = frozenset(
    {
        "SendHeartbeat",
        "SendLifeline",
        "BlockReceivedAndDeleted",
        "BlockReport",
        "CacheReport",
        "RegisterDatanode",
        "VersionRequest",
        "ErrorReport",
        "CommitBlockSynchronization",
    }
)
#: The RPC server's name for a call it did not receive by RPC: a WebHDFS request.
WEBHDFS_METHOD = "(external)"
_NUM_OPS = "NumOps"
#: Hadoop 3.5 also keeps every method's count under ``Overall<method>NumOps`` (the same calls).
_OVERALL = "Overall"


@dataclass
class NameNodeCalls:
    """What the NameNode counted between two readings."""

    operations: dict[str, int] = field(default_factory=dict)
    """Namesystem operations by kind (`NAMESYSTEM_OPERATIONS`), both routes."""
    rpcs: dict[str, int] = field(default_factory=dict)
    """Client RPCs by method (``Create``, ``Rename``, ``GetListing``...)."""
    webhdfs: int = 0
    """WebHDFS requests (the RPC server's external calls)."""

    @property
    def operations_total(self) -> int:
        return sum(self.operations.values())

    @property
    def total(self) -> int:
        """Every call the NameNode served: client RPCs and WebHDFS requests."""
        return sum(self.rpcs.values()) + self.webhdfs


class NameNodeCounter:
    """Reads the NameNode's counters; `since(earlier)` gives what the NameNode did after `earlier`.

    ``before = counter.read(); ...; calls = counter.since(before)``.
    """

    def __init__(self, cluster: HadoopCluster) -> None:
        self.cluster = cluster
        self.rpc_bean = f"RpcDetailedActivityForPort{cluster.namenode_rpc_port}"

    def read(self) -> NameNodeCalls:
        """The counters as they stand (cumulative since the NameNode started)."""
        namesystem = self.cluster.namenode_metrics(NAMESYSTEM_BEAN)
        rpc = self.cluster.namenode_metrics(self.rpc_bean)
        calls = {
            key[: -len(_NUM_OPS)]: int(value)
            for key, value in rpc.items()
            if key.endswith(_NUM_OPS) and not key.startswith(_OVERALL)
        }
        return NameNodeCalls(
            operations={kind: int(namesystem.get(name, 0)) for kind, name in NAMESYSTEM_OPERATIONS.items()},
            rpcs={
                method: count
                for method, count in calls.items()
                if method not in DATANODE_METHODS and method != WEBHDFS_METHOD
            },
            webhdfs=calls.get(WEBHDFS_METHOD, 0),
        )

    def since(self, earlier: NameNodeCalls) -> NameNodeCalls:
        now = self.read()
        return NameNodeCalls(
            operations={
                kind: count - earlier.operations.get(kind, 0) for kind, count in now.operations.items()
            },
            rpcs={
                method: count - earlier.rpcs.get(method, 0)
                for method, count in now.rpcs.items()
                if count != earlier.rpcs.get(method, 0)
            },
            webhdfs=now.webhdfs - earlier.webhdfs,
        )
