"""Run records to metrics, plots, reports and sim-vs-real validation."""
