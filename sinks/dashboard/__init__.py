"""The live dashboard (``python -m sinks.dashboard``)."""
