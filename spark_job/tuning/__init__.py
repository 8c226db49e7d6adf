"""What the detector job does only to win time on a small machine, in one place. Each piece was left out in
turn in `make bench ONLY=demo` and kept because it bought more than the runs' spread (docs/performance.md,
"Workarounds for two cores", has the figures):

- the settings of the local profile (``common.settings.LOCAL_PROFILE``), off on a cluster master;
- ``rehearsal``: the job's query plans run on throw-away topics before the live ones start
  (``FRAUD_DETECTOR_WARMUP_S``; `make demo` 60 s, the job's default 0);
- ``codegen`` (with ``backlog``): interpreted code for small batches, compiled for large ones
  (``FRAUD_SPARK_CODEGEN_FACTORY_MODE``, ``FRAUD_SPARK_CODEGEN_LARGE_BATCH_ROWS``).
"""
