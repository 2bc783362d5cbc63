"""The held-out trace sets of the time-to-target table (``benchmarks/tta_table.py``).

Each set maps a trace (a generator spec or a file under ``benchmarks/data/``) to its network
class. A set's comment says when it was made, what it shares with no other set, and whether
``mpc`` has been tuned on it since; ``tests/benchmarks/test_tta_table.py`` checks that each set
shares no trace, generator seed or source file with the sets before it and with the bundled
traces, and that every imported file is its source as imported. A new set goes at the end,
numbered one past the last (``bench_controllers.py --held-out-N`` picks it up).
"""

from __future__ import annotations

#: Fresh traces from the generators with seeds never used while tuning (held out).
HELD_OUT = {
    "markov:seed=9101,good_mean_s=40,bad_mean_s=15,bad_bandwidth_factor=0.1,duration_s=1800": (
        "congestion"
    ),
    "walk:seed=9102,bw_gbps=10,bandwidth_sigma=0.3,lat_sigma_ms=0.5,duration_s=1800": (
        "random-walk"
    ),
    "spikes:seed=9103,lat_ms=0.5,bw_gbps=25,spike_rate_per_s=0.2,spike_min_ms=5": "delay-spikes",
    "steps:dur_s=20/40/30/60,lat_ms=2/20/5/1,bw_gbps=10/1/3/25,loop=true": "stepped",
    # Real throughput traces never run while tuning, imported from Pensieve's cooked set with
    # ``compctl trace import pensieve --scale 1000 --latency-ms 1`` (see each file's header).
    "benchmarks/data/heldout-norway-car-1-x1000.csv": "cellular-shape",
    "benchmarks/data/heldout-norway-metro-1-x1000.csv": "cellular-shape",
    "benchmarks/data/heldout-fcc-13092-x1000.csv": "broadband-shape",
}
#: A second held-out set, generated and imported after ``mpc`` had been tuned on both sets
#: above (2026-11-25): generator seeds used nowhere else, and the bundled real throughput
#: traces the bundled table leaves out, bandwidth x1000 and latency 1 ms (see each file).
HELD_OUT_2 = {
    "markov:seed=9301,good_mean_s=30,bad_mean_s=20,bad_bandwidth_factor=0.05,duration_s=1800": (
        "congestion"
    ),
    "walk:seed=9302,bw_gbps=5,bandwidth_sigma=0.4,lat_sigma_ms=1,duration_s=1800": "random-walk",
    "spikes:seed=9303,lat_ms=1,bw_gbps=10,spike_rate_per_s=0.1,spike_min_ms=10": "delay-spikes",
    "steps:dur_s=30/20/50/40,lat_ms=5/1/10/2,bw_gbps=5/25/2/10,loop=true": "stepped",
    "benchmarks/data/heldout2-norway-train-1-x1000.csv": "cellular-shape",
    "benchmarks/data/heldout2-norway-ferry-1-x1000.csv": "cellular-shape",
    "benchmarks/data/heldout2-fcc-10322-x1000.csv": "broadband-shape",
}
#: A third held-out set, generated and imported on 2026-11-26 before ``mpc`` was tuned on the
#: second one, and never run while tuning: generator seeds used nowhere else, a step schedule
#: with other durations, latencies and bandwidths, the two Pensieve traces no other set uses
#: (bandwidth x1000, latency 5 and 2 ms) and the eight Skyplane regions ``geo-8region`` leaves
#: out (see each file's header).
HELD_OUT_3 = {
    "markov:seed=9501,lat_ms=2,bw_gbps=10,good_mean_s=50,bad_mean_s=12,"
    "bad_bandwidth_factor=0.08,duration_s=1800": "congestion",
    "walk:seed=9502,lat_ms=2,bw_gbps=20,bandwidth_sigma=0.3,lat_sigma_ms=0.5,"
    "duration_s=1800": "random-walk",
    "spikes:seed=9503,lat_ms=2,bw_gbps=5,spike_rate_per_s=0.15,spike_min_ms=8": "delay-spikes",
    "steps:dur_s=25/45/15/35,lat_ms=3/15/1/8,bw_gbps=8/2/40/4,loop=true": "stepped",
    "benchmarks/data/heldout3-norway-tram-1-x1000.csv": "cellular-shape",
    "benchmarks/data/heldout3-fcc-10367-x1000.csv": "broadband-shape",
    "benchmarks/data/heldout3-geo-8region-b.csv": "geo-distributed",
}

#: A fourth held-out set, made on 2026-11-26 after all tuning of that day and run once, on the
#: final code (never tuned on): generator seeds used nowhere else with other parameters, a
#: five-phase step schedule, two Pensieve test-set traces no other set uses at other scales
#: and latencies, and one link stepping through single Skyplane region pairs
#: (``benchmarks/make_heldout4_geo_pairs.py``; every other geo trace is per-region means).
HELD_OUT_4 = {
    "markov:seed=9601,lat_ms=4,bw_gbps=15,good_mean_s=25,bad_mean_s=25,"
    "bad_bandwidth_factor=0.15,duration_s=1800": "congestion",
    "walk:seed=9602,lat_ms=1,bw_gbps=8,bandwidth_sigma=0.5,lat_sigma_ms=0.3,"
    "duration_s=1800": "random-walk",
    "spikes:seed=9603,lat_ms=0.2,bw_gbps=40,spike_rate_per_s=0.3,spike_min_ms=3": "delay-spikes",
    "steps:dur_s=10/50/20/30/40,lat_ms=0.5/10/2/25/4,bw_gbps=30/3/12/0.8/6,loop=true": "stepped",
    "benchmarks/data/heldout4-norway-car-2-x300.csv": "cellular-shape",
    "benchmarks/data/heldout4-norway-metro-6-x3000.csv": "cellular-shape",
    "benchmarks/data/heldout4-geo-pairs.csv": "geo-distributed",
}

#: A fifth held-out set, made on 2026-11-26 after the fifth round of tuning and run once, on the
#: final code (never tuned on): generator seeds used nowhere else with other parameters, the
#: ``sine`` generator no other set uses (antiphase latency, jitter), a six-phase step schedule,
#: and real data used in ways no other set uses (``benchmarks/make_heldout5_traces.py``): a
#: Pensieve throughput trace with the latency a standing queue gives it, and the bottleneck
#: hops of Skyplane region rings.
HELD_OUT_5 = {
    "markov:seed=9701,lat_ms=1.5,bw_gbps=6,good_mean_s=35,bad_mean_s=8,"
    "bad_bandwidth_factor=0.04,duration_s=1800": "congestion",
    "walk:seed=9702,lat_ms=3,bw_gbps=12,bandwidth_sigma=0.25,lat_sigma_ms=0.8,"
    "duration_s=1800": "random-walk",
    "spikes:seed=9703,lat_ms=0.8,bw_gbps=20,spike_rate_per_s=0.05,spike_min_ms=20": (
        "delay-spikes"
    ),
    "sine:seed=9704,lat_ms=2,bw_gbps=10,bandwidth_amplitude=0.7,latency_amplitude=0.6,"
    "wave_period_s=45,jitter=0.2,duration_s=1800": "periodic",
    "steps:dur_s=15/35/25/10/45/20,lat_ms=1/6/0.3/30/2/12,bw_gbps=20/2/50/0.5/8/4,loop=true": (
        "stepped"
    ),
    "benchmarks/data/heldout5-tram-queue.csv": "cellular-shape",
    "benchmarks/data/heldout5-geo-rings.csv": "geo-distributed",
}

#: A sixth held-out set, made on 2026-11-26 after the sixth round of tuning and run once, on the
#: final code (tuned on since the seventh round, 2026-11-26): generator seeds 9801-9804 used nowhere else, with settings no
#: other set uses (a congestion state that multiplies latency 20x, a random walk sampled every
#: 0.5 s, frequent short light-tailed spikes, a slow sine with deep latency swings), a
#: seven-phase step schedule, and real data used in ways no other set uses
#: (``benchmarks/make_heldout6_traces.py``): two Pensieve throughput traces in series, and the
#: all-pairs bottlenecks of Skyplane region groups on the STANDARD network tier.
HELD_OUT_6 = {
    "markov:seed=9801,lat_ms=0.5,bw_gbps=30,good_mean_s=20,bad_mean_s=30,"
    "bad_bandwidth_factor=0.2,bad_latency_factor=20,duration_s=1800": "congestion",
    "walk:seed=9802,lat_ms=8,bw_gbps=3,bandwidth_sigma=0.15,lat_sigma_ms=2,dt_s=0.5,"
    "duration_s=1800": "random-walk",
    "spikes:seed=9803,lat_ms=3,bw_gbps=8,spike_rate_per_s=0.5,spike_min_ms=2,spike_shape=2.5,"
    "spike_duration_s=0.2,duration_s=1800": "delay-spikes",
    "sine:seed=9804,lat_ms=0.5,bw_gbps=40,bandwidth_amplitude=0.5,latency_amplitude=0.9,"
    "wave_period_s=120,jitter=0.4,duration_s=1800": "periodic",
    "steps:dur_s=40/10/25/5/30/15/20,lat_ms=0.8/8/3/40/0.2/15/5,"
    "bw_gbps=15/1.5/6/0.3/60/2.5/10,loop=true": "stepped",
    "benchmarks/data/heldout6-series-fcc-metro.csv": "broadband-shape",
    "benchmarks/data/heldout6-geo-standard-mesh.csv": "geo-distributed",
}

#: A seventh held-out set, made on 2026-11-26 during the seventh round of tuning and run once, on
#: the final code (never tuned on): generator seeds 9901-9904 used nowhere else, with settings no
#: other set uses (short mild congestion on a slow high-latency link, a walk near zero latency
#: with a very wide bandwidth spread sampled every 2 s, rare long heavy-tailed spikes of 40 ms
#: and more, a fast deep bandwidth sine), a six-phase step schedule with extremes no other uses
#: (0.1-60 ms, 0.5-100 Gbit/s), and real data used in ways no other set uses
#: (``benchmarks/make_heldout7_traces.py``): two Pensieve throughput traces as parallel paths
#: replayed 4x faster, and Skyplane pairs with the ping jitter the matrices record.
HELD_OUT_7 = {
    "markov:seed=9901,lat_ms=6,bw_gbps=2,good_mean_s=60,bad_mean_s=5,"
    "bad_bandwidth_factor=0.3,bad_latency_factor=3,duration_s=1800": "congestion",
    "walk:seed=9902,lat_ms=0.2,bw_gbps=50,bandwidth_sigma=0.6,lat_sigma_ms=0.15,"
    "max_latency_ms=2,dt_s=2,duration_s=1800": "random-walk",
    "spikes:seed=9903,lat_ms=10,bw_gbps=1,spike_rate_per_s=0.03,spike_min_ms=40,"
    "spike_shape=1.2,spike_duration_s=1.5,duration_s=1800": "delay-spikes",
    "sine:seed=9904,lat_ms=5,bw_gbps=2,bandwidth_amplitude=0.85,latency_amplitude=0.3,"
    "wave_period_s=15,jitter=0.1,duration_s=1800": "periodic",
    "steps:dur_s=8/60/12/45/3/30,lat_ms=0.1/4/60/1/20/0.5,bw_gbps=100/5/0.5/20/1/40,"
    "loop=true": "stepped",
    "benchmarks/data/heldout7-parallel-ferry-car-fast.csv": "cellular-shape",
    "benchmarks/data/heldout7-geo-jitter.csv": "geo-distributed",
}

#: An eighth held-out set, made on 2026-11-26 before the eighth round of tuning and run once, on
#: the final code (never tuned on): generator seeds 9951-9954 used nowhere else, with settings no
#: other set uses (frequent mild congestion on a 20 ms link, a high-latency walk with a latency
#: floor sampled every 0.25 s, dense tiny capped spikes on a 100 Gbit/s link, a slow sine with
#: a near-total latency swing), an eight-phase step schedule, and real data used in ways no
#: other set uses (``benchmarks/make_heldout8_traces.py``): a Pensieve throughput trace replayed
#: backwards and 2x slower, and two-hop Skyplane overlay (relay) paths on min RTT.
HELD_OUT_8 = {
    "markov:seed=9951,lat_ms=20,bw_gbps=4,good_mean_s=15,bad_mean_s=15,"
    "bad_bandwidth_factor=0.5,bad_latency_factor=1.5,duration_s=1800": "congestion",
    "walk:seed=9952,lat_ms=15,bw_gbps=1,bandwidth_sigma=0.35,lat_sigma_ms=3,"
    "min_latency_ms=5,dt_s=0.25,duration_s=1800": "random-walk",
    "spikes:seed=9953,lat_ms=0.05,bw_gbps=100,spike_rate_per_s=1,spike_min_ms=0.5,"
    "spike_shape=3,spike_max_ms=5,spike_duration_s=0.05,duration_s=1800": "delay-spikes",
    "sine:seed=9954,lat_ms=30,bw_gbps=0.8,bandwidth_amplitude=0.3,latency_amplitude=0.95,"
    "wave_period_s=300,jitter=0.05,dt_s=2,duration_s=1800": "periodic",
    "steps:dur_s=12/6/40/9/25/18/50/4,lat_ms=2/0.05/30/7/0.4/90/3/12,"
    "bw_gbps=3/80/0.4/15/50/0.3/7/1.2,loop=true": "stepped",
    "benchmarks/data/heldout8-car2-reversed-slow.csv": "cellular-shape",
    "benchmarks/data/heldout8-geo-relay.csv": "geo-distributed",
}


#: A ninth held-out set, made on 2026-11-26 before the ninth round of tuning and run once, on
#: the final code (never tuned on): generator seeds 9961-9964 used nowhere else, with settings no
#: other set uses (long deep congestion on a fast link, a mid-latency walk sampled every second
#: with a latency floor, rare 0.6 s spikes of 15 ms and more on a slow link, a slow near-total
#: bandwidth sine), a nine-phase step schedule, and real data used in ways no other set uses
#: (``benchmarks/make_heldout9_traces.py``): a handover every 20 s between a Pensieve cellular
#: and a broadband trace, and Skyplane region pairs at the lesser of both directions.
HELD_OUT_9 = {
    "markov:seed=9961,lat_ms=0.3,bw_gbps=50,good_mean_s=10,bad_mean_s=40,"
    "bad_bandwidth_factor=0.02,bad_latency_factor=5,duration_s=1800": "congestion",
    "walk:seed=9962,lat_ms=4,bw_gbps=6,bandwidth_sigma=0.45,lat_sigma_ms=1.5,"
    "min_latency_ms=1,dt_s=1,duration_s=1800": "random-walk",
    "spikes:seed=9963,lat_ms=5,bw_gbps=2,spike_rate_per_s=0.08,spike_min_ms=15,"
    "spike_shape=1.8,spike_duration_s=0.6,duration_s=1800": "delay-spikes",
    "sine:seed=9964,lat_ms=1,bw_gbps=20,bandwidth_amplitude=0.95,latency_amplitude=0.5,"
    "wave_period_s=600,jitter=0.3,duration_s=1800": "periodic",
    "steps:dur_s=20/8/35/14/28/6/45/10/16,lat_ms=0.7/50/1.5/0.02/18/4/0.3/70/9,"
    "bw_gbps=12/0.6/35/90/2/20/4/0.2/25,loop=true": "stepped",
    "benchmarks/data/heldout9-handover-train-fcc.csv": "handover",
    "benchmarks/data/heldout9-geo-bidir.csv": "geo-distributed",
}


#: A tenth held-out set, made on 2026-11-27 before the tenth round of tuning and run once, on
#: the final code (never tuned on): generator seeds 10001-10004 used nowhere else, with settings
#: no other set uses (short bad spells of moderate congestion on a mid-latency link, a
#: high-latency walk sampled every half second with a latency floor, frequent short spikes on
#: a fast link, a two-minute wave of latency and bandwidth), a seven-phase step schedule, and
#: real data used in ways no other set uses (``benchmarks/make_heldout10_traces.py``): a
#: Pensieve tram trace replayed 4x faster, and Skyplane stars whose slowest spoke is the link.
HELD_OUT_10 = {
    "markov:seed=10001,lat_ms=8,bw_gbps=2,good_mean_s=30,bad_mean_s=8,"
    "bad_bandwidth_factor=0.15,bad_latency_factor=3,duration_s=1800": "congestion",
    "walk:seed=10002,lat_ms=20,bw_gbps=1.5,bandwidth_sigma=0.2,lat_sigma_ms=4,"
    "min_latency_ms=5,dt_s=0.5,duration_s=1800": "random-walk",
    "spikes:seed=10003,lat_ms=1.5,bw_gbps=10,spike_rate_per_s=0.5,spike_min_ms=3,"
    "spike_shape=2.5,spike_duration_s=0.2,duration_s=1800": "delay-spikes",
    "sine:seed=10004,lat_ms=10,bw_gbps=4,bandwidth_amplitude=0.6,latency_amplitude=0.8,"
    "wave_period_s=120,jitter=0.15,duration_s=1800": "periodic",
    "steps:dur_s=15/30/7/22/11/40/5,lat_ms=5/0.2/40/1/25/0.8/60,"
    "bw_gbps=8/60/1/30/0.5/12/3,loop=true": "stepped",
    "benchmarks/data/heldout10-tram-fast.csv": "cellular-shape",
    "benchmarks/data/heldout10-geo-star.csv": "geo-distributed",
}

#: An eleventh held-out set, made on 2026-11-27 after the oracle without foresight had
#: separated foresight from ``mpc``'s approximations and before any ``mpc`` setting was chosen
#: from that split; run once, on the final code (never tuned on): generator seeds 10101-10104
#: used nowhere else, with settings no other set uses (long bad spells of deep congestion on a
#: low-latency link, a slow walk with a large latency spread sampled every two seconds, rare
#: long spikes on a slow link, a ten-minute wave with much jitter), an eight-phase step
#: schedule, and real data imported in ways no other set uses (``compctl trace import``; each
#: file's header): the Pensieve metro trace at x200 with 12 ms latency, and six Skyplane
#: regions on four continents at their slowest pair's throughput and least RTT.
HELD_OUT_11 = {
    "markov:seed=10101,lat_ms=0.5,bw_gbps=15,good_mean_s=60,bad_mean_s=45,"
    "bad_bandwidth_factor=0.03,bad_latency_factor=8,duration_s=1800": "congestion",
    "walk:seed=10102,lat_ms=12,bw_gbps=3,bandwidth_sigma=0.15,lat_sigma_ms=6,"
    "min_latency_ms=2,dt_s=2,duration_s=1800": "random-walk",
    "spikes:seed=10103,lat_ms=3,bw_gbps=1.5,spike_rate_per_s=0.02,spike_min_ms=40,"
    "spike_shape=1.5,spike_duration_s=2,duration_s=1800": "delay-spikes",
    "sine:seed=10104,lat_ms=3,bw_gbps=6,bandwidth_amplitude=0.8,latency_amplitude=0.3,"
    "wave_period_s=900,jitter=0.4,duration_s=1800": "periodic",
    "steps:dur_s=12/25/9/40/18/6/30/14,lat_ms=3/0.4/30/2/0.1/45/6/12,"
    "bw_gbps=5/40/0.8/10/70/0.3/15/2,loop=true": "stepped",
    "benchmarks/data/heldout11-metro-slow-wan.csv": "cellular-shape",
    "benchmarks/data/heldout11-geo-min6.csv": "geo-distributed",
}

#: A twelfth held-out set, made on 2026-11-27 (21:05 UTC) before the link-identification
#: step of ``mpc`` was tried on any table, and run once on the final code (never tuned on):
#: generator seeds 10201-10205 used nowhere else, with settings no other set uses (medium
#: bad spells on a fast link, a high-latency slow walk sampled every 0.75 s with a latency
#: floor, a fast walk with a small latency on a mid-rate link, half-second spikes on a fast
#: link, a five-minute wave moving latency more than bandwidth), a nine-phase step schedule,
#: and real data imported in ways no other set uses (``compctl trace import``; each file's
#: header): the Pensieve bus trace at x500 with 25 ms latency, and four regions of three
#: clouds over Skyplane's PREMIUM tier at their slowest pair.
HELD_OUT_12 = {
    "markov:seed=10201,lat_ms=2,bw_gbps=25,good_mean_s=20,bad_mean_s=15,"
    "bad_bandwidth_factor=0.08,bad_latency_factor=4,duration_s=1800": "congestion",
    "walk:seed=10202,lat_ms=25,bw_gbps=0.8,bandwidth_sigma=0.25,lat_sigma_ms=5,"
    "min_latency_ms=8,dt_s=0.75,duration_s=1800": "random-walk",
    "walk:seed=10205,lat_ms=2,bw_gbps=4,bandwidth_sigma=0.3,lat_sigma_ms=0.5,"
    "min_latency_ms=0.5,dt_s=0.3,duration_s=1800": "random-walk",
    "spikes:seed=10203,lat_ms=0.3,bw_gbps=30,spike_rate_per_s=0.1,spike_min_ms=8,"
    "spike_shape=2,spike_duration_s=0.5,duration_s=1800": "delay-spikes",
    "sine:seed=10204,lat_ms=1,bw_gbps=12,bandwidth_amplitude=0.5,latency_amplitude=0.9,"
    "wave_period_s=300,jitter=0.25,duration_s=1800": "periodic",
    "steps:dur_s=8/30/15/5/45/20/10/35/12,lat_ms=1/20/0.3/60/4/0.8/35/2/10,"
    "bw_gbps=20/1.5/50/0.5/8/25/1/12/3,loop=true": "stepped",
    "benchmarks/data/heldout12-bus-wan.csv": "cellular-shape",
    "benchmarks/data/heldout12-geo-premium4.csv": "geo-distributed",
}


#: A thirteenth held-out set, made on 2026-11-27 before any change of that evening was tried
#: on a table; reported once for ``replan_drop`` 9, then one of its cells diagnosed (tuned on
#: since): generator seeds 10301-10305 used nowhere else, with settings
#: no other set uses (long good spells and short deep bad ones with a large latency factor, a
#: slow walk at 15 ms sampled every 0.5 s with a latency floor, a fast sub-millisecond walk
#: sampled every 0.2 s, frequent short spikes on a 5 Gbit/s link, a two-minute wave moving
#: bandwidth more than latency), a seven-phase step schedule, and real data imported in ways
#: no other set uses (each file's header): the Pensieve ferry trace at x1500 with 15 ms
#: latency, and five regions of three clouds on any tier at their least RTT and mean rate.
HELD_OUT_13 = {
    "markov:seed=10301,lat_ms=5,bw_gbps=10,good_mean_s=40,bad_mean_s=8,"
    "bad_bandwidth_factor=0.05,bad_latency_factor=6,duration_s=1800": "congestion",
    "walk:seed=10302,lat_ms=15,bw_gbps=2,bandwidth_sigma=0.2,lat_sigma_ms=3,"
    "min_latency_ms=5,dt_s=0.5,duration_s=1800": "random-walk",
    "walk:seed=10303,lat_ms=0.5,bw_gbps=8,bandwidth_sigma=0.35,lat_sigma_ms=0.2,"
    "min_latency_ms=0.2,dt_s=0.2,duration_s=1800": "random-walk",
    "spikes:seed=10304,lat_ms=2,bw_gbps=5,spike_rate_per_s=0.3,spike_min_ms=3,"
    "spike_shape=1.5,spike_duration_s=0.2,duration_s=1800": "delay-spikes",
    "sine:seed=10305,lat_ms=8,bw_gbps=3,bandwidth_amplitude=0.7,latency_amplitude=0.5,"
    "wave_period_s=120,jitter=0.15,duration_s=1800": "periodic",
    "steps:dur_s=20/10/40/6/25/15/30,lat_ms=3/45/0.5/15/80/1.5/6,"
    "bw_gbps=6/0.8/40/2/0.3/15/4,loop=true": "stepped",
    "benchmarks/data/heldout13-ferry-metro-wan.csv": "cellular-shape",
    "benchmarks/data/heldout13-geo-min5.csv": "geo-distributed",
}


#: A fourteenth held-out set, made on 2026-11-27 (late) before ``byte_reading_sd`` was tried on
#: any table (never tuned on): generator seeds 10401-10405 used nowhere else, with settings no
#: other set uses (short good spells and long bad ones with a tenfold latency, a slow walk at
#: 6 ms sampled every second with a latency floor, a fast-link walk sampled every 0.4 s, rare
#: second-long spikes of at least 20 ms on a 2 Gbit/s link, a 45 s wave), a six-phase step
#: schedule, and real data imported in ways no other set uses (each file's header): the
#: Pensieve car trace at x2500 with 6 ms latency, and six PREMIUM-tier regions of three clouds
#: at their mean RTT and slowest pair.
HELD_OUT_14 = {
    "markov:seed=10401,lat_ms=1,bw_gbps=40,good_mean_s=12,bad_mean_s=25,"
    "bad_bandwidth_factor=0.15,bad_latency_factor=10,duration_s=1800": "congestion",
    "walk:seed=10402,lat_ms=6,bw_gbps=1.2,bandwidth_sigma=0.3,lat_sigma_ms=1.5,"
    "min_latency_ms=2,dt_s=1,duration_s=1800": "random-walk",
    "walk:seed=10403,lat_ms=3,bw_gbps=20,bandwidth_sigma=0.15,lat_sigma_ms=1,"
    "min_latency_ms=0.3,dt_s=0.4,duration_s=1800": "random-walk",
    "spikes:seed=10404,lat_ms=5,bw_gbps=2,spike_rate_per_s=0.05,spike_min_ms=20,"
    "spike_shape=3,spike_duration_s=1,duration_s=1800": "delay-spikes",
    "sine:seed=10405,lat_ms=0.5,bw_gbps=25,bandwidth_amplitude=0.3,latency_amplitude=0.6,"
    "wave_period_s=45,jitter=0.1,duration_s=1800": "periodic",
    "steps:dur_s=15/25/8/40/12/30,lat_ms=8/0.5/25/2/50/4,"
    "bw_gbps=3/30/0.6/10/0.4/6,loop=true": "stepped",
    "benchmarks/data/heldout14-car-regional.csv": "cellular-shape",
    "benchmarks/data/heldout14-geo-premium6.csv": "geo-distributed",
}


#: A fifteenth held-out set, made on 2026-11-28 with no change of ``mpc`` tried since the
#: fourteenth was measured; reported once for the defaults, then its misses diagnosed and
#: ``byte_hedge_sd`` built on them (tuned on since): generator seeds 10501-10505 used nowhere else, with
#: settings no other set uses (mild congestion of long spells with a threefold latency, a slow
#: WAN walk at 10 ms sampled every 1.5 s with a latency floor, a walk at 1 ms on a 12 Gbit/s
#: link sampled every 0.6 s, half-second spikes of at least 8 ms on a 10 Gbit/s link, an 80 s
#: wave with much jitter), a five-phase step schedule, and real data imported in ways no other
#: set uses (each file's header): the Pensieve tram trace at x600 with 20 ms latency, and the
#: five STANDARD-tier regions, one link each, at their mean RTT and mean rate.
HELD_OUT_15 = {
    "markov:seed=10501,lat_ms=3,bw_gbps=15,good_mean_s=25,bad_mean_s=15,"
    "bad_bandwidth_factor=0.3,bad_latency_factor=3,duration_s=1800": "congestion",
    "walk:seed=10502,lat_ms=10,bw_gbps=0.5,bandwidth_sigma=0.25,lat_sigma_ms=2,"
    "min_latency_ms=3,dt_s=1.5,duration_s=1800": "random-walk",
    "walk:seed=10503,lat_ms=1,bw_gbps=12,bandwidth_sigma=0.2,lat_sigma_ms=0.4,"
    "min_latency_ms=0.3,dt_s=0.6,duration_s=1800": "random-walk",
    "spikes:seed=10504,lat_ms=1,bw_gbps=10,spike_rate_per_s=0.1,spike_min_ms=8,"
    "spike_shape=2,spike_duration_s=0.5,duration_s=1800": "delay-spikes",
    "sine:seed=10505,lat_ms=3,bw_gbps=6,bandwidth_amplitude=0.5,latency_amplitude=0.3,"
    "wave_period_s=80,jitter=0.2,duration_s=1800": "periodic",
    "steps:dur_s=18/12/35/9/22,lat_ms=2/30/0.8/60/5,"
    "bw_gbps=8/1/25/0.5/3,loop=true": "stepped",
    "benchmarks/data/heldout15-tram-wan.csv": "cellular-shape",
    "benchmarks/data/heldout15-geo-standard5.csv": "geo-distributed",
}


#: A sixteenth held-out set, made on 2026-11-28 after ``byte_hedge_sd`` was developed on the
#: fifteenth set's misses and before any variant of it was chosen (never tuned on): generator
#: seeds 10601-10605 used nowhere else, with settings no other set uses (long good spells and
#: bad ones at a tenth of the bandwidth and twice the latency on a 2 Gbit/s link, a fast walk
#: at 4 ms sampled every 0.8 s, a slow WAN walk at 20 ms sampled every 3 s with a 10 ms floor,
#: rare three-second spikes of at least 50 ms, a slow deep wave on a 40 Gbit/s link), a
#: four-phase step schedule, and real data imported in ways no other set uses (each file's
#: header): the Pensieve FCC trace 10322 at x3000 with 4 ms latency, and six PREMIUM-tier
#: regions at their least RTT and mean rate.
HELD_OUT_16 = {
    "markov:seed=10601,lat_ms=8,bw_gbps=2,good_mean_s=60,bad_mean_s=20,"
    "bad_bandwidth_factor=0.1,bad_latency_factor=2,duration_s=1800": "congestion",
    "walk:seed=10602,lat_ms=4,bw_gbps=3,bandwidth_sigma=0.35,lat_sigma_ms=1,"
    "min_latency_ms=1,dt_s=0.8,duration_s=1800": "random-walk",
    "walk:seed=10603,lat_ms=20,bw_gbps=0.3,bandwidth_sigma=0.15,lat_sigma_ms=5,"
    "min_latency_ms=10,dt_s=3,duration_s=1800": "random-walk",
    "spikes:seed=10604,lat_ms=10,bw_gbps=1,spike_rate_per_s=0.02,spike_min_ms=50,"
    "spike_shape=2.5,spike_duration_s=3,duration_s=1800": "delay-spikes",
    "sine:seed=10605,lat_ms=1,bw_gbps=40,bandwidth_amplitude=0.8,latency_amplitude=0.2,"
    "wave_period_s=200,jitter=0.05,duration_s=1800": "periodic",
    "steps:dur_s=10/30/10/30,lat_ms=5/1/40/10,"
    "bw_gbps=2/20/0.2/5,loop=true": "stepped",
    "benchmarks/data/heldout16-fcc-regional.csv": "broadband-shape",
    "benchmarks/data/heldout16-geo-premium-min6.csv": "geo-distributed",
}


#: A seventeenth held-out set, made on 2026-11-28 after ``ping_on_jump`` was developed on the
#: bundled, fourteenth, fifteenth and sixteenth sets and before it ran on this one (never
#: tuned on): generator seeds 10701-10706 used nowhere else, with settings no other set uses
#: (congestion on a 5 Gbit/s link whose bad spells cut bandwidth to a fifth and quadruple the
#: latency, a WAN walk at 8 ms sampled every 2 s with a 2 ms floor, a walk at 2 ms on a
#: 6 Gbit/s link sampled every second, one-second spikes of at least 20 ms, a two-minute wave
#: in both terms), a four-phase step schedule, and real data imported in ways no other set uses
#: (each file's header): the Pensieve train trace at x2000 with 12 ms latency, and seven
#: regions of any tier at their mean RTT and least rate.
HELD_OUT_17 = {
    "markov:seed=10701,lat_ms=2,bw_gbps=5,good_mean_s=30,bad_mean_s=10,"
    "bad_bandwidth_factor=0.2,bad_latency_factor=4,duration_s=1800": "congestion",
    "walk:seed=10702,lat_ms=8,bw_gbps=1,bandwidth_sigma=0.2,lat_sigma_ms=3,"
    "min_latency_ms=2,dt_s=2,duration_s=1800": "random-walk",
    "walk:seed=10703,lat_ms=2,bw_gbps=6,bandwidth_sigma=0.3,lat_sigma_ms=0.8,"
    "min_latency_ms=0.5,dt_s=1,duration_s=1800": "random-walk",
    "spikes:seed=10704,lat_ms=3,bw_gbps=4,spike_rate_per_s=0.05,spike_min_ms=20,"
    "spike_shape=3,spike_duration_s=1,duration_s=1800": "delay-spikes",
    "sine:seed=10705,lat_ms=5,bw_gbps=10,bandwidth_amplitude=0.6,latency_amplitude=0.5,"
    "wave_period_s=120,jitter=0.1,duration_s=1800": "periodic",
    "steps:dur_s=15/25/20/40,lat_ms=3/25/1/12,"
    "bw_gbps=6/0.8/15/2,loop=true": "stepped",
    "benchmarks/data/heldout17-train-wan.csv": "cellular-shape",
    "benchmarks/data/heldout17-geo-any-avg7.csv": "geo-distributed",
}
