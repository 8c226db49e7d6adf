"""The analyst's surface: the detector contract, the detectors, the harness, samples, template and backtest.

The streaming job that runs them is ``spark_job`` (``python -m detectors run``)."""
