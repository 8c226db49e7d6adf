"""Fraud detectors: one PySpark Structured Streaming query each (design.md section 3)."""
