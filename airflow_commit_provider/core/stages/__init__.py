"""Protocol stages shared by every committer, each a small step over the store interface.

Modelled on Hadoop's manifest committer: a stage takes a `JobContext` and a clear input and
returns a clear output, so committers compose stages instead of copying them.
"""
