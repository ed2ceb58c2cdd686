"""Sans-I/O Raft core for the KRaft-style `__cluster_metadata` quorum (see core.py)."""
