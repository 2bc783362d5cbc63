"""Units of the real-run life cycle: stop signals, per-rank logs, the rendezvous socket, the
saved qdisc."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from realrun.qdisc_guard import RootQdiscGuard, parse_root_qdisc
from realrun.rank_log import ROW_KEYS, RankLog, partial_rows, read_rank_logs, split_iteration
from realrun.rendezvous import listen_socket, make_store, parse_endpoint
from realrun.signals import Interrupted, stop_signals
from sim.errors import InputError


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_stop_signals_raise_interrupted_once(sig: signal.Signals) -> None:
    before = signal.getsignal(sig)
    with pytest.raises(Interrupted) as info, stop_signals():
        os.kill(os.getpid(), sig)
        time.sleep(1.0)
    assert info.value.signum == sig and isinstance(info.value, KeyboardInterrupt)
    assert signal.getsignal(sig) is before
    with stop_signals():
        with pytest.raises(Interrupted):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGHUP)  # a second one during clean-up is ignored
        time.sleep(0.05)


def test_rank_logs_give_partial_records(tmp_path: Path) -> None:
    for rank, iter_s in ((0, 0.1), (1, 0.3)):
        log = RankLog(tmp_path, rank)
        for it in range(3 - rank):  # rank 1 stopped one iteration earlier
            log.write("iteration", iteration=it, start_s=it * 0.3, iter_s=iter_s,
                      loss=1.0 + rank, comm_s=0.01, density=1.0, compressor="none",
                      collective="ring", warmup=it == 0, gain=float("nan"))
        log.close()
    with open(tmp_path / "rank1.jsonl", "a") as fh:
        fh.write('{"kind": "iter')  # torn last line: dropped
    logs = read_rank_logs(tmp_path)
    assert [len(v) for v in logs.values()] == [3, 2]
    rows = partial_rows(logs, "dense")
    assert [r["iteration"] for r in rows] == [0, 1, 2]
    assert [r["iter_s"] for r in rows] == [0.3, 0.3, 0.1]  # max over the ranks that logged it
    assert rows[0]["loss"] == 1.5 and rows[2]["loss"] == 1.0
    assert all(tuple(r) == ROW_KEYS for r in rows)
    assert RankLog(None, 0).write("iteration", iteration=0) is None  # no folder: no-op


def test_endpoint_parsing() -> None:
    assert parse_endpoint("10.0.0.1:29500") == ("10.0.0.1", 29500)
    assert parse_endpoint("[fd00::1]:29500") == ("fd00::1", 29500)
    for bad in ("10.0.0.1", "h:0", "h:70000", ":5", "h:x"):
        with pytest.raises(InputError, match="HOST:PORT"):
            parse_endpoint(bad)
    with pytest.raises(InputError, match="all interfaces"):
        parse_endpoint("0.0.0.0:29500")


def _listeners(port: int) -> list[str]:
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            cols = line.split()
            addr, hexport = cols[1].rsplit(":", 1)
            if cols[3] == "0A" and int(hexport, 16) == port:
                found.append(addr)
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/net")
def test_rank0_store_listens_on_the_named_address_only() -> None:
    probe = listen_socket("127.0.0.1", 0)
    port = probe.getsockname()[1]
    probe.close()
    store = make_store(0, 1, "127.0.0.1", port, 10.0)
    store.set("k", "v")
    assert _listeners(port) == ["0100007F"]  # 127.0.0.1, not 0.0.0.0
    del store


def test_root_qdisc_is_parsed_and_restored() -> None:
    assert parse_root_qdisc("") is None
    assert parse_root_qdisc("qdisc noqueue 0: root refcnt 2\n") is None
    assert parse_root_qdisc("qdisc tbf 8001: root refcnt 2 rate 10Mbit burst 3027b lat 100ms") \
        == ["handle", "8001:", "tbf", "rate", "10Mbit", "burst", "3027b", "lat", "100ms"]
    calls: list[list[str]] = []

    def runner(cmd: list[str]) -> subprocess.CompletedProcess[str]:
        calls.append(list(cmd))
        out = "qdisc fq 8002: root refcnt 2 limit 10000p\n" if "show" in cmd else ""
        return subprocess.CompletedProcess(cmd, 0, out, "")

    with RootQdiscGuard("eth9", runner=runner):
        pass
    assert calls[-1] == ["tc", "qdisc", "replace", "dev", "eth9", "root", "handle", "8002:",
                         "fq", "limit", "10000p"]
    calls.clear()

    def default_root(cmd: list[str]) -> subprocess.CompletedProcess[str]:
        calls.append(list(cmd))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    with RootQdiscGuard("eth9", netns="x", runner=default_root):
        pass
    assert calls[-1] == ["ip", "netns", "exec", "x", "tc", "qdisc", "del", "dev", "eth9", "root"]


def test_root_qdisc_restored_on_a_real_interface() -> None:
    from realrun.netns import netns_unavailable_reason

    reason = netns_unavailable_reason()
    if reason is not None:
        pytest.skip(f"needs a network namespace: {reason}")
    import secrets

    ns = f"cc-qd-{secrets.token_hex(3)}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        def tc(*args: str) -> str:
            return subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", *args],
                                  capture_output=True, text=True, check=True).stdout

        tc("add", "dev", "lo", "root", "handle", "8001:", "tbf", "rate", "10mbit", "burst",
           "3028", "latency", "100ms")
        before = tc("show", "dev", "lo", "root")
        with RootQdiscGuard("lo", netns=ns):
            tc("replace", "dev", "lo", "root", "handle", "8001:", "tbf", "rate", "20mbit",
               "burst", "3028", "latency", "50ms")
            assert tc("show", "dev", "lo", "root") != before
        # tc prints the burst after its own rounding: re-applying it may move it by a byte
        def norm(show: str) -> list[str]:
            words = show.split()
            return [w for i, w in enumerate(words) if i == 0 or words[i - 1] != "burst"]

        assert norm(tc("show", "dev", "lo", "root")) == norm(before)
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def test_iteration_parts_never_exceed_the_iteration() -> None:
    # a netns-run case: the early rank's wait (max over ranks) exceeds the mean iteration
    exposed, compress, compute = split_iteration(0.020, 0.025, 0.001)
    assert (exposed, compress, compute) == (0.019, 0.001, 0.0)
    assert split_iteration(0.05, 0.02, 0.01) == (0.02, 0.01, 0.05 - 0.01 - 0.02)
    assert split_iteration(0.01, 0.5, 0.5) == (0.0, 0.01, 0.0)
    assert split_iteration(0.03, 0.0, 0.0) == (0.0, 0.0, 0.03)


@settings(max_examples=300, deadline=None)
@given(iter_s=st.floats(0.0, 10.0), exposed=st.floats(-1.0, 50.0),
       compress=st.floats(-1.0, 50.0))
def test_iteration_parts_are_bounded_and_add_up(iter_s: float, exposed: float,
                                                compress: float) -> None:
    """Whatever the ranks measured (maxima over ranks can exceed the mean iteration, as in
    netns runs), the recorded parts lie in [0, iter_s] and add up to iter_s."""
    e, c, k = split_iteration(iter_s, exposed, compress)
    assert 0.0 <= e <= iter_s and 0.0 <= c <= iter_s and 0.0 <= k <= iter_s + 1e-12
    assert e + c + k == pytest.approx(iter_s, abs=1e-12)
    assert e <= max(exposed, 0.0) and c <= max(compress, 0.0)


def test_the_blamed_rank_is_the_root_cause_not_the_peer_that_aborted() -> None:
    from realrun.launcher import _blame

    # Rank 1 was SIGKILLed; rank 0 aborted in gloo because its peer vanished. Both are found dead
    # by the same poll: blame rank 1.
    assert _blame([-signal.SIGABRT, -signal.SIGKILL]) == 1
    assert _blame([1, -signal.SIGSEGV]) == 1  # a crash outranks a peer's "connection closed"
    assert _blame([-signal.SIGABRT, 2]) == 1  # an input error is the rank's own
    assert _blame([1, None, 1]) == 0  # nothing tells them apart: the lowest rank
    assert _blame([None, 0, -signal.SIGABRT]) == 2
