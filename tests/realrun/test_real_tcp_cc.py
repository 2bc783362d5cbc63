"""``compctl real --tcp-cc``: the rank namespaces' congestion controller (netns emulation only).

The controller is a real run setting (BBR misreads a tbf-shaped link); the config keeps it, earlier
runs' configs stay as they were, and a setting the run cannot honour is refused up front.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import realrun.netns
from realrun.config import RealConfig
from realrun.launcher import launch
from sim.entry import main
from sim.errors import InputError

TRACE = "steps:dur_s=1,lat_ms=1,bw_mbps=50"


def test_off_by_default_left_out_of_the_config_and_round_trips_when_set() -> None:
    off = RealConfig(workload="digits-mlp", emulation="netns", trace=TRACE)
    assert off.tcp_cc is None and "tcp_cc" not in off.to_dict()
    on = RealConfig(workload="digits-mlp", emulation="netns", trace=TRACE, tcp_cc="reno")
    assert on.to_dict()["tcp_cc"] == "reno"
    assert RealConfig.from_dict(on.to_dict()) == on


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"emulation": "hook", "trace": TRACE, "tcp_cc": "reno"}, "needs --emulation netns"),
    ({"emulation": "none", "tcp_cc": "reno"}, "needs --emulation netns"),
    ({"emulation": "netns", "trace": TRACE, "tcp_cc": "reno; reboot"}, "congestion controller"),
    ({"emulation": "netns", "trace": TRACE, "tcp_cc": ""}, "congestion controller"),
])
def test_a_setting_the_run_cannot_honour_is_refused(kwargs: dict[str, Any], needle: str) -> None:
    with pytest.raises(InputError, match=needle):
        RealConfig(workload="digits-mlp", **kwargs)


def test_cli_refuses_tcp_cc_without_netns_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["real", "--workload", "digits-mlp", "--steps", "1", "--emulation", "hook",
                 "--trace", TRACE, "--tcp-cc", "reno",
                 "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--tcp-cc" in err
    assert not (tmp_path / "run").exists()


class _Stop(Exception):
    pass


def test_the_launcher_hands_the_controller_to_the_namespaces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    def fake_lab(n: int, **kwargs: Any) -> Any:
        seen.update(kwargs, n=n)
        raise _Stop

    monkeypatch.setattr(realrun.netns, "NetnsLab", fake_lab)
    monkeypatch.setattr(realrun.netns, "netns_unavailable_reason", lambda: None)
    cfg = RealConfig(workload="digits-mlp", nproc=2, steps=1, emulation="netns", trace=TRACE,
                     tcp_cc="reno")
    with pytest.raises(_Stop):
        launch(cfg, tmp_path / "run")
    assert seen["n"] == 2 and seen["congestion_control"] == "reno"
