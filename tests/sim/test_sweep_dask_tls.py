"""Sweeps on a Dask scheduler over mutual TLS, and the refusals around it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from sweep_fakes import fake_run, normalize

from sim.entry import main
from sim.sweep import expand_spec, parse_spec, run_sweep
from sim.sweep.dask_tls import DaskTLS, connect

SPEC = """
name = "tls"
seeds = 1
[base]
workload = "tiny"
workers = 4
iterations = 5
trace = "delay-highvar"
[grid]
policy = ["dense"]
"""


def _spec(tmp_path: Path) -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(SPEC)
    return p


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--tls-cert", "c.pem"], "missing --tls-ca-file, --tls-key"),
        (["--scheduler", "tls://127.0.0.1:1"], "uses TLS: give --tls-ca-file"),
        (["--tls-ca-file", "c.pem", "--tls-cert", "c.pem", "--tls-key", "c.pem"], "for a Dask scheduler"),
        (["--scheduler", "tcp://127.0.0.1:1", "--tls-ca-file", "c.pem", "--tls-cert", "c.pem",
          "--tls-key", "c.pem"], "is not a tls:// address"),
        (["--scheduler", "tls://127.0.0.1:1", "--tls-ca-file", "nope.pem", "--tls-cert", "c.pem",
          "--tls-key", "c.pem"], "nope.pem: no such file"),
    ],
)
def test_tls_flags_are_checked_before_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    extra: list[str], message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.pem").write_text("x")
    out = tmp_path / "out"
    assert main(["sweep", str(_spec(tmp_path)), "--out", str(out), "--quiet", *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _make_pki(d: Path) -> None:
    """A CA and one certificate for 127.0.0.1 that it signed (scheduler, workers and client share it)."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
             "-days", "1", "-subj", "/CN=compctl-test-ca", cwd=d)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "node.key", "-out", "node.csr",
             "-subj", "/CN=127.0.0.1", cwd=d)
    (d / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "node.pem", "-days", "1", "-extfile", "san.cnf", cwd=d)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_sweep_over_mutual_tls_matches_the_local_pool(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    from distributed.security import Security

    pki = tmp_path / "pki"
    pki.mkdir()
    _make_pki(pki)
    ca, cert, key = (str(pki / n) for n in ("ca.pem", "node.pem", "node.key"))
    security = Security(
        tls_ca_file=ca, tls_scheduler_cert=cert, tls_scheduler_key=key,
        tls_worker_cert=cert, tls_worker_key=key, tls_client_cert=cert, tls_client_key=key,
        require_encryption=True,
    )
    runs = expand_spec(
        parse_spec({"seeds": 2, "base": {"iterations": 3}, "grid": {"trace": ["lan", "wan"]}}),
        normalize,
    )
    run_sweep(runs, tmp_path / "pool", run_fn=fake_run, jobs=1, progress=False)
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None,
        protocol="tls://", host="127.0.0.1", security=security,
    ) as cluster:
        address = cluster.scheduler_address
        assert address.startswith("tls://")
        client = connect(address, DaskTLS(ca, cert, key))
        try:
            res = run_sweep(runs, tmp_path / "tls", run_fn=fake_run, scheduler=client, progress=False)
        finally:
            client.close()
    assert res.completed == 4 and not res.failures

    def tidy(out: Path) -> pd.DataFrame:
        frames = [pd.read_parquet(p) for p in sorted(out.rglob("records.parquet"))]
        return pd.concat(frames, ignore_index=True)

    pd.testing.assert_frame_equal(tidy(tmp_path / "pool"), tidy(tmp_path / "tls"))
