import dagster as dg

#: One partition per session file; keys look like ``agent:relative/path.jsonl``.
session_partitions = dg.DynamicPartitionsDefinition(name="session_files")
