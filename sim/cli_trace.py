"""``compctl trace``: list, generate, import, show and plot network traces.

Human units (ms, Mbit/s, Gbit/s) exist only here; everything passed on is SI. Every command that
writes a file writes it atomically, and bad input raises :class:`~sim.errors.InputError` before
anything is written (the entry point turns it into one line on stderr and exit status 2).

The trace library is :mod:`traces`, which sits below ``sim``; this front end lives in ``sim``
because ``trace from-run`` counts a collective's latency terms with :mod:`sim.collectives`.

Size (over 400 lines): the front end of every trace subcommand with its per-format option
table; the logic is in traces/.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from compctl_base.errors import InputError
from traces.bundled import DATA_DIR, bundled_info, resolve_trace
from traces.csvio import write_trace_csv, write_trace_parquet
from traces.genspec import GENERATOR_KINDS, generate, generator_help
from traces.model import TraceSet
from traces.summary import format_latency, format_rate, summarize

__all__ = ["register"]

_TRACE_EPILOG = """\
A trace argument (show, plot, and `compctl sim --trace`) is a bundled name, a canonical
.csv/.parquet file, or a generator spec KIND[:key=value,...], e.g. const:lat_ms=1,bw_gbps=10.

examples:
  compctl trace list
  compctl trace show seed003-steps
  compctl trace gen seed003 --param step_s=10 --out /tmp/s.csv
  compctl trace import pensieve norway.tsv --latency-ms 20 --out /tmp/norway.csv
  compctl trace from-run runs/r1 --out /tmp/r1.csv
  compctl trace plot delay-highvar --out highvar.png
"""

_GEN_EPILOG = """\
Parameter keys take a unit suffix that converts to SI: _s, _ms, _us for time; _Bps (bytes/s),
_bps, _kbps, _mbps, _gbps (bits/s) for rates. Aliases: lat = latency, bw = bandwidth,
dur = duration. Lists (steps only) use '/'. Defaults: latency 1 ms, bandwidth 10 Gbit/s, seed 0.

examples:
  compctl trace gen const --param lat_ms=1 --param bw_gbps=10 --out const.csv
  compctl trace gen steps --param dur_s=30/60 --param lat_ms=1/8 --param bw_gbps=25/5 --out s.csv
  compctl trace gen walk --param seed=3 --param bandwidth_sigma=0.2 --out walk.parquet
  compctl trace gen markov:seed=1,bad_mean_s=5 --out markov.csv

kinds and their parameters (SI names):
"""

_IMPORT_EPILOG = """\
formats:
  mahimahi  one integer ms per line = one 1500-byte delivery opportunity; binned into
            --window-ms windows (default 100) for bandwidth; latency from --latency-ms
            (default 0: the format has none); loops with the file's last timestamp.
  pensieve  'time_s<TAB>Mbit/s' lines; latency from --latency-ms (default 0); --scale
            multiplies bandwidth; loops (period = last time + median interval).
  ping      Linux ping output (-D timestamps used when present, else icmp_seq x
            --interval-s); latency = RTT/2 unless --rtt; bandwidth from --bandwidth-gbps or
            --bandwidth-mbps (required); lost probes hold the previous latency.
  iperf3    iperf3 --json report: bandwidth per interval; latency = mean TCP stream RTT/2
            when present, else --latency-ms.
  skyplane  FILE = a directory with latency.csv and throughput.csv ('bundled' = the subset
            shipped with compctl); --regions a,b,c gives one constant link per region:
            latency = mean RTT/2 to the other regions (--rtt-stat avg|min), bandwidth = mean
            (or --bandwidth-agg min) throughput to them; --list-regions lists regions.

examples:
  compctl trace import mahimahi att.down --window-ms 50 --latency-ms 30 --out att.csv
  compctl trace import ping ping.log --bandwidth-gbps 10 --out ping.csv
  compctl trace import skyplane bundled --regions aws:us-east-1,gcp:us-central1-a --out g.csv
"""

#: Import options (argparse dests) each format accepts.
_IMPORT_OPTIONS: dict[str, tuple[str, ...]] = {
    "mahimahi": ("window_ms", "latency_ms", "name"),
    "pensieve": ("latency_ms", "scale", "name"),
    "ping": ("bandwidth_gbps", "bandwidth_mbps", "rtt", "interval_s", "name"),
    "iperf3": ("latency_ms", "no_rtt", "name"),
    "skyplane": ("regions", "rtt_stat", "bandwidth_agg", "tier", "list_regions", "name"),
}


def _import_options() -> dict[str, tuple[str, ...]]:
    """Each import format's options: the built-in table, and the generic options of formats
    that third-party packages register (entry-point group ``compctl.trace_importers``)."""
    from traces.importers import PLUGIN_OPTIONS, importers

    return {fmt: _IMPORT_OPTIONS.get(fmt, PLUGIN_OPTIONS) for fmt in importers()}


_FROM_RUN_EPILOG = """\
Inverts the alpha-beta cost of each iteration's collective (sim/collectives):
comm_s = A latency + bytes_sent / bandwidth, A = the collective's latency count for the run's
workers times the DDP buckets per iteration. Windows with several payload sizes (compressed and
dense iterations) fit both by least squares; a window with one size holds the latency (previous
window's fit, else --latency-ms, else 0: the bandwidth is then a lower bound). Values are
clamped to [0, 10 s] and [1 kB/s, 10 TB/s]. Iteration 0 (connection setup) is skipped. Refuses
simulated, failed or interrupted runs and runs with fewer than 4 usable iterations. The source
run and method are stored in the file.

examples:
  compctl trace from-run runs/r1 --out r1.csv
  compctl trace from-run runs/r1 --window-iters 50 --latency-ms 2 --out r1.parquet
"""


def _write(ts: TraceSet, out: str, notes: dict[str, str] | None = None) -> None:
    suffix = Path(out).suffix.lower()
    if suffix == ".csv":
        write_trace_csv(ts, out, notes=notes)
    elif suffix in (".parquet", ".pq"):
        write_trace_parquet(ts, out, notes=notes)
    else:
        raise InputError(f"--out {out!r}: use a .csv or .parquet file name")


def _check_out(out: str, allowed: tuple[str, ...], *, force: bool = False) -> None:
    """Reject a bad output name, or an existing file without ``--force``, before any work."""
    if Path(out).suffix.lower() not in allowed:
        raise InputError(f"--out {out!r}: the file name must end in {' or '.join(allowed)}")
    if Path(out).is_dir():
        raise InputError(f"--out {out!r} is a directory")
    if os.path.lexists(out) and not force:
        raise InputError(f"--out {out!r}: the file exists (use --force to replace it)")
    parent = Path(out).parent
    if parent.exists() and not parent.is_dir():
        raise InputError(f"--out {out!r}: {parent} is not a folder")


def _cmd_list(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = []
    for name, desc, source in bundled_info():
        ts = resolve_trace(name)
        s = summarize(ts)
        rows.append(
            {
                "name": name,
                "links": len(s),
                "duration_s": max(x.duration_s for x in s),
                "loops": any(x.loops for x in s),
                "description": desc,
                "source": source,
            }
        )
    if args.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    width = max(len(r["name"]) for r in rows) if rows else 4
    sys.stdout.write(f"{'name':<{width}}  links    duration  description\n")
    for r in rows:
        dur = f"{r['duration_s']:.0f} s" + (" loop" if r["loops"] else "")
        sys.stdout.write(f"{r['name']:<{width}}  {r['links']:>5}  {dur:>10}  {r['description']}\n")
    sys.stdout.write(
        "\nAlso accepted wherever a trace is: a .csv/.parquet path, or a generator spec "
        f"({', '.join(GENERATOR_KINDS)}); see `compctl trace gen --help`.\n"
    )
    return 0


def _cmd_gen(args: argparse.Namespace) -> int:
    _check_out(args.out, (".csv", ".parquet", ".pq"), force=args.force)
    spec = args.kind
    extra = []
    for p in args.param:
        if "=" not in p:
            raise InputError(f"bad --param {p!r}: expected key=value")
        if "," in p:
            raise InputError(f"bad --param {p!r}: give one key=value per --param")
        extra.append(p.strip())
    if extra:
        spec = spec + ("," if ":" in spec else ":") + ",".join(extra)
    trace = generate(spec)
    # The name is set on the set, not parsed from the spec, so it may hold any character.
    ts = TraceSet({"*": trace}, name=args.name or trace.name)
    _write(ts, args.out)
    return 0


def _import_kwargs(fmt: str, args: argparse.Namespace) -> dict[str, Any]:
    given = {
        k
        for k in (
            "window_ms",
            "latency_ms",
            "scale",
            "bandwidth_gbps",
            "bandwidth_mbps",
            "interval_s",
            "regions",
            "rtt_stat",
            "bandwidth_agg",
            "tier",
            "name",
        )
        if getattr(args, k) is not None
    } | {k for k in ("rtt", "no_rtt", "list_regions") if getattr(args, k)}
    bad = sorted(given - set(_import_options()[fmt]))
    if bad:
        opt = "--" + bad[0].replace("_", "-")
        raise InputError(f"option {opt} does not apply to format {fmt}")
    kw: dict[str, Any] = {}
    if args.name is not None:
        kw["name"] = args.name
    if args.latency_ms is not None:
        kw["latency_s"] = args.latency_ms * 1e-3
    if fmt == "mahimahi" and args.window_ms is not None:
        kw["window_s"] = args.window_ms * 1e-3
    if fmt == "pensieve" and args.scale is not None:
        kw["scale"] = args.scale
    if fmt == "ping":
        if args.bandwidth_gbps is not None and args.bandwidth_mbps is not None:
            raise InputError("give one of --bandwidth-gbps and --bandwidth-mbps")
        if args.bandwidth_gbps is None and args.bandwidth_mbps is None:
            raise InputError("ping has no bandwidth: give --bandwidth-gbps or --bandwidth-mbps")
        rate_bps = (
            args.bandwidth_gbps * 1e9
            if args.bandwidth_gbps is not None
            else args.bandwidth_mbps * 1e6
        )
        kw["bandwidth_Bps"] = rate_bps / 8.0
        kw["rtt"] = bool(args.rtt)
        if args.interval_s is not None:
            kw["interval_s"] = args.interval_s
    if fmt == "iperf3":
        kw["use_rtt"] = not args.no_rtt
    if fmt == "skyplane":
        if not args.regions:
            raise InputError("skyplane needs --regions a,b,... (see --list-regions)")
        kw["regions"] = [r for r in args.regions.split(",") if r.strip()]
        for dest, key in (("rtt_stat", "rtt"), ("bandwidth_agg", "bandwidth"), ("tier", "tier")):
            if getattr(args, dest) is not None:
                kw[key] = getattr(args, dest)
    return kw


def _cmd_import(args: argparse.Namespace) -> int:
    from traces.importers import importers, skyplane_regions

    fmt = args.format
    path = args.file
    if fmt == "skyplane" and path == "bundled":
        path = str(DATA_DIR / "skyplane")
    if fmt == "skyplane" and args.list_regions:
        sys.stdout.write("\n".join(skyplane_regions(path)) + "\n")
        return 0
    if args.out is None:
        raise InputError("--out FILE is required (a .csv or .parquet file)")
    _check_out(args.out, (".csv", ".parquet", ".pq"), force=args.force)
    kw = _import_kwargs(fmt, args)
    ts = importers()[fmt](path, **kw)
    _write(ts, args.out)
    return 0


def _latency_count(collective: str, workers: int) -> float:
    """Latency terms of one ``collective`` among ``workers`` (:mod:`sim.collectives`)."""
    from sim.collectives.closed_form import collective_terms

    return collective_terms(collective, workers, 1.0).n_alpha


def _cmd_from_run(args: argparse.Namespace) -> int:
    from traces.fromrun import trace_from_run

    _check_out(args.out, (".csv", ".parquet", ".pq"), force=args.force)
    if args.window_s is not None and args.window_iters is not None:
        raise InputError("give one of --window-s and --window-iters")
    if args.latency_ms is not None and not (0 <= args.latency_ms <= 10_000):
        raise InputError("--latency-ms must be in [0, 10000]")
    ts, notes, fits = trace_from_run(
        args.run,
        latency_count=_latency_count,
        window_s=args.window_s,
        window_iters=args.window_iters,
        latency_s=None if args.latency_ms is None else args.latency_ms * 1e-3,
        name=args.name,
    )
    _write(ts, args.out, notes)
    if not args.quiet:
        for f in fits:
            sys.stderr.write(
                f"  from {f.start_s:9.3f} s  {f.rows:5d} it  latency "
                f"{format_latency(f.latency_s):>10}  bandwidth {format_rate(f.bandwidth_Bps):>12}"
                f"  ({f.method})\n"
            )
    return 0


def _cmd_show(args: argparse.Namespace) -> int:
    ts = resolve_trace(args.trace)
    summ = summarize(ts)
    if args.json:
        doc = {"name": ts.name, "links": [s.as_dict() for s in summ]}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return 0
    w = sys.stdout.write
    w(
        f"trace {ts.name}: {len(summ)} link(s)"
        + (" (one trace for every link)\n" if ts.is_shared else "\n")
    )
    for s in summ:
        if s.loops:
            span = f"loops every {s.duration_s:.6g} s"
        elif s.segments == 1:
            span = "constant"
        else:
            span = f"changes until {s.duration_s:.6g} s, then holds"
        head = "" if s.link == "*" else f"[{s.link}] "
        w(f"  {head}{s.segments} segment(s), {span}\n")
        w(
            f"    latency    min {format_latency(s.latency_min_s):>12}  mean "
            f"{format_latency(s.latency_mean_s):>12}  max {format_latency(s.latency_max_s):>12}\n"
        )
        w(
            f"    bandwidth  min {format_rate(s.bandwidth_min_Bps):>12}  mean "
            f"{format_rate(s.bandwidth_mean_Bps):>12}  max {format_rate(s.bandwidth_max_Bps):>12}\n"
        )
        if s.loss_max > 0:
            w(f"    loss       max {s.loss_max:.4g}\n")
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    from traces.plot import plot_traces

    _check_out(args.out, (".png", ".pdf", ".svg"), force=args.force)
    if args.horizon_s is not None and not args.horizon_s > 0:
        raise InputError("--horizon-s must be > 0")
    ts = resolve_trace(args.trace)
    plot_traces(ts, args.out, horizon_s=args.horizon_s)
    return 0


def _gen_epilog() -> str:
    lines = [_GEN_EPILOG]
    for kind, desc, params in generator_help():
        lines.append(f"  {kind:<8} {desc}\n           {', '.join(params)}\n")
    return "".join(lines)


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add ``compctl trace ...`` to ``sub``."""
    fmt = argparse.RawDescriptionHelpFormatter
    top = sub.add_parser(
        "trace",
        help="list, generate, import, show and plot network traces",
        description="Network traces: piecewise-constant latency and bandwidth over time.",
        epilog=_TRACE_EPILOG,
        formatter_class=fmt,
    )
    tsub = top.add_subparsers(dest="trace_command", metavar="ACTION")
    top.set_defaults(func=lambda a: (top.print_help(), 2)[1])

    p = tsub.add_parser(
        "list",
        help="the bundled traces",
        formatter_class=fmt,
        epilog="examples:\n  compctl trace list\n  compctl trace list --json\n",
    )
    p.add_argument("--json", action="store_true", help="machine-readable output (SI units)")
    p.set_defaults(func=_cmd_list)

    p = tsub.add_parser(
        "gen", help="generate a synthetic trace", epilog=_gen_epilog(), formatter_class=fmt
    )
    p.add_argument(
        "kind", metavar="KIND", help=f"one of {', '.join(GENERATOR_KINDS)} (or KIND:k=v,...)"
    )
    p.add_argument(
        "--param", action="append", default=[], metavar="K=V", help="a parameter (repeatable)"
    )
    p.add_argument("--name", help="name stored in the file")
    p.add_argument("--out", required=True, help="output .csv or .parquet")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.set_defaults(func=_cmd_gen)

    p = tsub.add_parser(
        "import",
        help="convert a measured trace to the canonical format",
        epilog=_IMPORT_EPILOG,
        formatter_class=fmt,
    )
    formats = sorted(_import_options())
    p.add_argument(
        "format",
        choices=formats,
        metavar="FORMAT",
        help=f"one of {', '.join(formats)}",
    )
    p.add_argument("file", metavar="FILE", help="input file (skyplane: directory or 'bundled')")
    p.add_argument("--out", help="output .csv or .parquet")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--name", help="name stored in the file (default: input file stem)")
    p.add_argument(
        "--latency-ms", type=float, help="constant one-way latency where the format has none"
    )
    p.add_argument("--window-ms", type=float, help="mahimahi: binning window (default 100)")
    p.add_argument("--scale", type=float, help="pensieve: multiply bandwidth (default 1)")
    p.add_argument("--bandwidth-gbps", type=float, help="ping: constant bandwidth in Gbit/s")
    p.add_argument("--bandwidth-mbps", type=float, help="ping: constant bandwidth in Mbit/s")
    p.add_argument("--rtt", action="store_true", help="ping: latency = full RTT, not RTT/2")
    p.add_argument("--interval-s", type=float, help="ping: probe interval without -D (default 1)")
    p.add_argument("--no-rtt", action="store_true", help="iperf3: ignore stream RTTs")
    p.add_argument("--regions", help="skyplane: comma-separated regions")
    p.add_argument("--rtt-stat", choices=("avg", "min"), help="skyplane: RTT column (default avg)")
    p.add_argument(
        "--bandwidth-agg", choices=("mean", "min"), help="skyplane: aggregate (default mean)"
    )
    p.add_argument("--tier", choices=("PREMIUM", "STANDARD", "any"), help="skyplane: network tier")
    p.add_argument("--list-regions", action="store_true", help="skyplane: list regions and exit")
    p.set_defaults(func=_cmd_import)

    p = tsub.add_parser(
        "from-run",
        help="fit a replayable trace to a real run's measured collective times",
        epilog=_FROM_RUN_EPILOG,
        formatter_class=fmt,
    )
    p.add_argument("run", metavar="RUN", help="folder of a complete `compctl real` run")
    p.add_argument("--out", required=True, help="output .csv or .parquet")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--window-s", type=float, help="fit one link state per this many seconds "
                   "of run time (default 10)")
    p.add_argument("--window-iters", type=int, help="fit one link state per this many iterations")
    p.add_argument("--latency-ms", type=float, help="one-way latency to assume in windows with "
                   "a single payload size, until a window fits one (default 0)")
    p.add_argument("--name", help="name stored in the file (default from-run:RUN)")
    p.add_argument("--quiet", action="store_true", help="no per-window summary on stderr")
    p.set_defaults(func=_cmd_from_run)

    p = tsub.add_parser(
        "show",
        help="summary of a trace",
        formatter_class=fmt,
        epilog="examples:\n  compctl trace show geo-8region\n  compctl trace show walk:seed=1 --json\n",
    )
    p.add_argument("trace", metavar="TRACE", help="bundled name, file, or generator spec")
    p.add_argument("--json", action="store_true", help="machine-readable output (SI units)")
    p.set_defaults(func=_cmd_show)

    p = tsub.add_parser(
        "plot",
        help="plot latency and bandwidth over time",
        formatter_class=fmt,
        epilog="examples:\n  compctl trace plot seed003-steps --out s.png\n"
        "  compctl trace plot norway-bus-1 --horizon-s 600 --out bus.png\n",
    )
    p.add_argument("trace", metavar="TRACE", help="bundled name, file, or generator spec")
    p.add_argument("--out", required=True, help="output image (.png, .pdf or .svg)")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--horizon-s", type=float, help="time span to draw (default: one duration)")
    p.set_defaults(func=_cmd_plot)
