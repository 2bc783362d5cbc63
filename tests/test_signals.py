"""SIGTERM and SIGHUP take Ctrl-C's clean path in sweep and capture (exit 128 + signal)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sim.signals import Interrupted, exit_status, interrupt_on_signals


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_signals_raise_an_interrupt_inside_the_block_only(sig: signal.Signals) -> None:
    before = signal.getsignal(sig)
    with pytest.raises(Interrupted) as exc, interrupt_on_signals():
        os.kill(os.getpid(), sig)
        time.sleep(5)  # the handler runs at the next bytecode boundary
    assert exc.value.signum == sig and exit_status(exc.value) == 128 + sig
    assert isinstance(exc.value, KeyboardInterrupt)  # every Ctrl-C clean-up path runs
    assert signal.getsignal(sig) == before


def test_ctrl_c_keeps_status_130() -> None:
    assert exit_status(KeyboardInterrupt()) == 130


def test_sigterm_to_capture_is_a_clean_stop(tmp_path: Path) -> None:
    out = tmp_path / "g.npz"
    code = "import sys; from sim.entry import main; sys.exit(main())"
    argv = ["capture", "--workload", "digits-mlp", "--steps", "100000", "--quiet"]
    log = tmp_path / "err.txt"
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-c", code, *argv, "--out", str(out)], stdout=fh, stderr=fh
        )
        time.sleep(6)  # past the imports, into training
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    err = log.read_text()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "interrupted (SIGTERM)" in err and "Traceback" not in err
    assert not out.exists()
