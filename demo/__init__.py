"""``make demo`` (``python -m demo``): the whole diamond on the local stack, a live view and a report.

It sits above everything else: it starts the local stack (``deploy``), the detector job
(``spark_job``), the downstream services and the producer as processes, watches them drain and
scores the alerts. The end-to-end suite reuses its building blocks (``diamond``, ``drain``).
"""
