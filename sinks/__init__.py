"""The downstream services (faust-streaming): the enricher, the case manager and the dashboard.

They read the alerts the Spark job commits (``read_committed``) and meet it only at Kafka topics and the
contracts of ``common``: nothing here imports ``spark_job``, ``detectors`` or ``models``.
"""
