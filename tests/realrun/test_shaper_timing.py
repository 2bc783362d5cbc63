"""The trace shaper records when each change was applied; ``tc`` calls of one change run at
once (no namespaces needed)."""

from __future__ import annotations

import threading
import time

import pytest

from realrun.shaper import TraceShaper, run_tc_all
from sim.errors import InputError
from traces.model import PiecewiseTrace


def test_shaper_records_begin_and_end_of_each_change() -> None:
    done = threading.Event()
    tr = PiecewiseTrace([0.0, 0.01, 0.03], [0.0, 0.0, 0.0], [1.0, 2.0, 3.0])
    seen: list[float] = []

    def apply(bp: object) -> None:
        time.sleep(0.005)
        seen.append(bp.bandwidth_Bps)  # type: ignore[attr-defined]
        if len(seen) == 2:
            done.set()

    sh = TraceShaper(tr, apply, horizon_s=1.0, rt_priority=1)
    sh.start(time.monotonic())
    assert done.wait(5.0)
    sh.stop()
    assert sh.error is None
    got = sh.link_changes()
    assert [c["at_s"] for c in got] == [0.01, 0.03]
    assert [c["bandwidth_Bps"] for c in got] == [2.0, 3.0]
    for c in got:
        assert c["at_s"] <= c["begin_s"] < c["end_s"]
        assert c["end_s"] - c["begin_s"] >= 0.004
    assert [t for t, _ in sh.applied] == [c["end_s"] for c in got]
    with pytest.raises(ValueError, match="rt_priority"):
        TraceShaper(tr, apply, rt_priority=-1)


def test_tc_commands_of_one_change_run_at_once_and_failures_are_named() -> None:
    t = time.monotonic()
    run_tc_all([(["sleep", "0.3"], None)] * 3)
    assert time.monotonic() - t < 0.8  # three 0.3 s commands, not one after another
    with pytest.raises(InputError, match="`false` failed"):
        run_tc_all([(["true"], None), (["false"], None)])
