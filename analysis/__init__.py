"""Run records to metrics, plots, reports and sim-vs-real validation.

Modules: :mod:`analysis.load` (tidy frames from sweeps, runs and folders of runs),
:mod:`analysis.metrics` (per-run metrics and speed-ups), :mod:`analysis.plots` (seaborn
figures), :mod:`analysis.report` (self-contained HTML). Import them directly; this package
imports nothing heavy by itself.
"""
