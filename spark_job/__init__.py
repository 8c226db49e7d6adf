"""The PySpark Structured Streaming job that runs the detectors (``python -m detectors run``).

Kafka source → parse and validate (``parsing``) → dead letters (``dead_letters``) | watermark → detector
→ the exactly-once writer (``alert_writer``). ``queries`` builds the queries, ``job`` starts and
``supervision`` restarts them, ``progress`` reports them. It meets the downstream services only at
Kafka topics and the contracts of ``common``: it never imports ``sinks``.
"""
