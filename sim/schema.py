"""The run-record schema shared by simulated and real runs.

One row per iteration in ``records.parquet``; the configuration, versions and seed in
``meta.json``. Real runs (``source="real"``) add loss/accuracy; the convergence model adds
progress and predicted loss/accuracy. Analysis code relies on these names and units.
"""

from __future__ import annotations

__all__ = ["REQUIRED_COLUMNS", "OPTIONAL_COLUMNS", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1

#: Column -> dtype for every run, simulated or real.
REQUIRED_COLUMNS: dict[str, str] = {
    "iteration": "int64",
    "start_s": "float64",  # wall/simulated time at which the iteration started
    "compute_s": "float64",  # forward + backward + optimizer compute
    "exposed_comm_s": "float64",  # communication not hidden behind backward compute
    "compress_s": "float64",  # compression + decompression overhead on the critical path
    "iter_s": "float64",  # total iteration time
    "bytes_sent": "float64",  # bytes one worker sent this iteration
    "density": "float64",
    "compressor": "string",
    "collective": "string",
    "latency_s": "float64",  # link state at the iteration start (ground truth in sim)
    "bandwidth_Bps": "float64",
    "policy": "string",
    "source": "string",  # "sim" or "real"
}

#: Columns present when the run has them.
OPTIONAL_COLUMNS: dict[str, str] = {
    "comm_s": "float64",  # total communication time including the overlapped part
    "gain": "float64",  # compression gain ||C(g_e)||^2 / ||g_e||^2
    "progress": "float64",  # cumulative training progress (dense iterations equivalent)
    "loss": "float64",
    "accuracy": "float64",
    "pred_loss": "float64",
    "pred_accuracy": "float64",
    "est_latency_s": "float64",  # the monitor's estimates the controller saw
    "est_bandwidth_Bps": "float64",
    # what the estimates' latency/bandwidth split rests on: "fit", "reference", "guess",
    # "prior" (sim.control.monitor.SPLIT_SOURCES), a perfect monitor's name ("truth", ...) in
    # the simulator's diagnostics, "" without a monitor
    "est_split": "string",
    "rank": "int64",
    "decide_s": "float64",  # the controller's decide() seconds in the iteration
    "decide_hidden_s": "float64",  # the part of decide_s hidden in network waits (lag 1)
    # real runs: the least exposed communication over ranks (the last rank to reach the
    # exchange waits for nobody: the exchange alone, without the others' lateness)
    "exposed_comm_min_s": "float64",
}
