"""A stand-in run function for sweep and report tests: fast, deterministic, configurable failures."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: trace name -> (latency_s, bandwidth_Bps)
LINKS = {"lan": (1e-4, 1.25e9), "wan": (20e-3, 0.125e9)}
GRAD_BYTES = 1e8


def normalize(cfg: dict[str, Any]) -> dict[str, Any]:
    """Fill defaults like SimConfig.to_dict would; InputError naming a bad field."""
    from sim.errors import InputError

    out = {"policy": "dense", "policy_params": {}, "seed": 0, "trace": "lan", "iterations": 5}
    out.update(cfg)
    if out["trace"] not in LINKS:
        raise InputError(f"trace: unknown {out['trace']!r}")
    if not isinstance(out["iterations"], int) or out["iterations"] < 1:
        raise InputError(f"iterations must be an integer >= 1, got {out['iterations']!r}")
    return out


def fake_run(cfg: dict[str, Any]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Records whose times follow closed forms of the config (plus seeded compute jitter)."""
    if cfg.get("policy") == "boom":
        raise RuntimeError("policy exploded\nsecond line")
    kill_at = os.environ.get("SWEEP_FAKES_KILL_AT")
    if kill_at is not None and cfg.get("seed") == int(kill_at):
        # Simulates the sweep process being killed: leave a half-written run behind, then die.
        marker = os.environ["SWEEP_FAKES_RUNS_DIR"]
        Path(marker, ".deadbeefdeadbeef.xyz.tmp").mkdir(parents=True, exist_ok=True)
        Path(marker, ".deadbeefdeadbeef.xyz.tmp", "records.parquet").write_bytes(b"half")
        os._exit(9)
    counter = os.environ.get("SWEEP_FAKES_COUNTER")
    if counter:
        with open(counter, "a") as fh:
            fh.write(f"{cfg.get('seed')}\n")
    lat, bw = LINKS[cfg.get("trace", "lan")]
    policy = cfg.get("policy", "dense")
    density = 1.0 if policy == "dense" else float(cfg.get("policy_params", {}).get("density", 0.1))
    n = int(cfg.get("iterations", 5))
    rng = np.random.default_rng(np.random.SeedSequence(int(cfg.get("seed", 0))))
    compute = 0.1 + 0.001 * rng.random(n) if cfg.get("jitter") else np.full(n, 0.1)
    # the wan link's delay alternates around its mean (even n keeps the mean exact)
    lat_i = lat * (1 + 0.5 * (-1.0) ** np.arange(n)) if cfg.get("trace") == "wan" else np.full(n, lat)
    comm = lat_i + GRAD_BYTES * density / bw
    iter_s = compute + comm
    start = np.concatenate([[0.0], np.cumsum(iter_s)[:-1]])
    progress = np.cumsum(np.full(n, density**0.25))
    rec = pd.DataFrame(
        {
            "iteration": np.arange(n),
            "start_s": start,
            "compute_s": compute,
            "exposed_comm_s": comm,
            "compress_s": np.zeros(n),
            "iter_s": iter_s,
            "bytes_sent": np.full(n, GRAD_BYTES * density),
            "density": np.full(n, density),
            "compressor": "none" if density == 1.0 else "topk",
            "collective": "ring",
            "latency_s": lat_i,
            "bandwidth_Bps": np.full(n, bw),
            "policy": policy,
            "source": cfg.get("source", "sim"),
        }
    )
    if cfg.get("with_accuracy"):
        rec["pred_accuracy"] = 1.0 - np.exp(-0.3 * progress)
    return rec, {"config": cfg, "seed": cfg.get("seed", 0)}


def interrupting_run(cfg: dict[str, Any]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Like fake_run, but Ctrl-C arrives during the run with seed 1."""
    if cfg.get("seed") == 1:
        raise KeyboardInterrupt
    return fake_run(cfg)
