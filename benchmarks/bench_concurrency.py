"""flowsim against the naive exact baseline (and SimGrid, when installed) across concurrency.

Workloads in the format of the SimGrid reference sets (``tests/data/README_bench.md``): flows on
the 128-host leaf-spine (8 leaves x 16 hosts, 4 spines, 100 Gb/s links, latency 0), ``W`` waves
of ``C`` flows, flow ``j`` of wave ``w`` starting when flow ``j`` of wave ``w - 1`` ends, so about
``C`` flows run at once. ``c100`` and ``c1000`` are the shipped sets (SimGrid's completion times
included); the others (``c10``, ``c300``, ``c2000``, ``c5000``) are generated with the same recipe
(random host pairs, sizes 1-100 MB, a random spine per inter-leaf flow) from a fixed seed.

Every measurement is a **whole process** (interpreter start, imports, reading the workload,
building the topology, the replay), as a user meets it: this script starts each simulator as a
child process, alternating flowsim and the baseline(s) ``--repeat`` times, and compares each
simulator's best wall time (shared machines slow down for seconds at a time; alternating and
taking the best compares both at the same machine speed). The children's CPU times are printed
too. The naive baseline is ``benchmarks/reference/naive_maxmin.py`` (full progressive filling at
every event, pure Python), unchanged. flowsim's child checks its completion times against the
file's ``done`` times where they come from SimGrid and against the naive baseline's otherwise
(``err``: largest relative difference).

SimGrid joins when its Python bindings import (``import simgrid``); this script never builds
them (how, and the ~20 minutes it takes on 2 cores: :func:`child_simgrid`).

Usage::

    python benchmarks/bench_concurrency.py                       # all six, 3 runs each
    python benchmarks/bench_concurrency.py --sizes 10 100 --repeat 5
    python benchmarks/bench_concurrency.py --no-naive            # flowsim alone (fast)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
NAIVE = ROOT / "benchmarks" / "reference" / "naive_maxmin.py"

HOSTS, LEAVES, SPINES, PER_LEAF = 128, 8, 4, 16
LINK_BYTES_PER_S = 100e9 / 8
SIZES = (10, 100, 300, 1000, 2000, 5000)
"""Concurrency levels (flows at once) of the benchmark."""

SHIPPED = {100: "leafspine128_10k_c100.json", 1000: "leafspine128_10k_c1000.json"}


def route(src: int, dst: int, spine: int) -> list[int]:
    """Link ids of a flow on the reference leaf-spine (ids as in ``tests/data/README_bench.md``).

    0-127 host up, 128-255 leaf down to host, 256 + 4 l + s leaf up to spine, 288 + 8 s + l
    spine down to leaf.
    """
    ls, ld = src // PER_LEAF, dst // PER_LEAF
    if ls == ld:
        return [src, 128 + dst]
    return [src, 256 + SPINES * ls + spine, 288 + LEAVES * spine + ld, 128 + dst]


def generate(concurrency: int, flows: int = 10_000, seed: int = 12) -> dict:
    """A workload of ``flows`` flows in waves of ``concurrency`` (no ``done`` times)."""
    rng = random.Random(seed * 100_003 + concurrency)
    out, routes = [], []
    for i in range(flows):
        src, dst = rng.sample(range(HOSTS), 2)
        size = rng.randint(1_000_000, 100_000_000)
        dep = i - concurrency if i >= concurrency else -1
        out.append([src, dst, size, dep])
        routes.append(route(src, dst, rng.randrange(SPINES)))
    n_links = HOSTS * 2 + LEAVES * SPINES * 2
    # ``done`` holds placeholders, not completion times: the naive baseline script, run unchanged,
    # reads it for the error it prints, which this benchmark ignores for generated workloads.
    return {"cap": [LINK_BYTES_PER_S] * n_links, "lat": 0.0, "flows": out, "routes": routes,
            "done": [1.0] * flows}


def workload_file(concurrency: int, tmp: Path, flows: int = 10_000) -> tuple[Path, bool]:
    """The workload's JSON file and whether its ``done`` times come from SimGrid."""
    if concurrency in SHIPPED and flows == 10_000:
        return DATA / SHIPPED[concurrency], True
    path = tmp / f"leafspine128_c{concurrency}_{flows}.json"
    if not path.exists():
        path.write_text(json.dumps(generate(concurrency, flows)), encoding="utf-8")
    return path, False


# -- the children ----------------------------------------------------------------------------------
def error_text(err: float) -> str:
    """The err column: the largest relative difference, or "-" where nothing was compared."""
    return "-" if math.isnan(err) else f"{err:.1e}"


def child_flowsim(path: str, out: str | None) -> None:
    """Replay a workload with flowsim (imports inside: the child's start-up is what is timed)."""
    from flowsim.network import Network
    from flowsim.topology import Link, Node, Topology

    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    cap, flows, routes = data["cap"], data["flows"], data["routes"]
    hosts = [f"h{i}" for i in range(HOSTS)]
    leaves = [f"leaf{i}" for i in range(LEAVES)]
    spines = [f"spine{i}" for i in range(SPINES)]
    ends = [(hosts[i], leaves[i // PER_LEAF]) for i in range(HOSTS)]
    ends += [(leaves[i // PER_LEAF], hosts[i]) for i in range(HOSTS)]
    ends += [(leaves[a], spines[s]) for a in range(LEAVES) for s in range(SPINES)]
    ends += [(spines[s], leaves[a]) for s in range(SPINES) for a in range(LEAVES)]
    topo = Topology(tuple(Node(h, "host") for h in hosts)
                    + tuple(Node(s, "switch") for s in leaves + spines),
                    tuple(Link(i, a, b, cap[i] * 8.0, 0.0) for i, (a, b) in enumerate(ends)))
    net = Network(topo)
    kids: list[list[int]] = [[] for _ in flows]
    for i, f in enumerate(flows):
        if f[3] >= 0:
            kids[f[3]].append(i)
    done = [0.0] * len(flows)
    start_flow = net.start_flow

    def start(i: int) -> None:
        src, dst, size, _dep = flows[i]
        ev = start_flow(hosts[src], hosts[dst], float(size), path=routes[i])
        ev.callbacks.append(lambda e, i=i: finished(i, e.value.end_s))

    def finished(i: int, end: float) -> None:
        done[i] = end
        for k in kids[i]:
            start(k)

    for i, f in enumerate(flows):
        if f[3] < 0:
            start(i)
    net.env.run()
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(done, fh)


def child_simgrid(path: str, out: str | None) -> None:
    """Replay a workload with SimGrid's max-min model (CM02) through its Python bindings.

    Checked against SimGrid 4.1's s4u Python API (``pip install --no-build-isolation
    simgrid==4.1`` after ``pybind11<3`` and ``libboost-dev``, about 20 minutes of compiling on
    2 cores, with ``LD_LIBRARY_PATH`` naming the folder that holds the installed
    ``libsimgrid.so``): its completion times match the
    shipped sets' SimGrid times (the parent prints the largest difference). Each flow's route is
    fixed by the file, and SimGrid routes by host pair, so every server appears once per spine
    (``h{i}s{k}``) and a flow through spine ``k`` runs between the ``k``-th copies of its
    endpoints, over the shared link objects.
    """
    import simgrid
    from simgrid import Actor, Comm, Engine

    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    cap, flows, routes = data["cap"], data["flows"], data["routes"]
    engine = Engine(["bench", "--cfg=network/model:CM02", "--cfg=network/crosstraffic:0",
                     "--cfg=network/TCP-gamma:0", "--log=root.thres:critical"])
    zone = engine.netzone_root.add_netzone_full("bench")
    links = [zone.add_link(f"l{i}", float(c)).seal() for i, c in enumerate(cap)]
    hosts = {(h, k): zone.add_host(f"h{h}s{k}", 1e9).seal()
             for h in range(HOSTS) for k in range(SPINES)}
    declared: set[tuple[int, int, int]] = set()
    ends: list[tuple[object, object]] = []
    for (src, dst, _size, _dep), route_ids in zip(flows, routes, strict=True):
        spine = 0 if len(route_ids) == 2 else (route_ids[1] - 256) % SPINES
        if (src, dst, spine) not in declared:
            declared.add((src, dst, spine))
            zone.add_route(hosts[src, spine], hosts[dst, spine],
                           [simgrid.LinkInRoute(links[i]) for i in route_ids], False)
        ends.append((hosts[src, spine], hosts[dst, spine]))
    zone.seal()
    kids: list[list[int]] = [[] for _ in flows]
    for i, f in enumerate(flows):
        if f[3] >= 0:
            kids[f[3]].append(i)
    done = [0.0] * len(flows)

    def chain(first: int) -> None:  # flow j of every wave, one after another
        i = first
        while True:
            Comm.sendto(ends[i][0], ends[i][1], int(flows[i][2]))
            done[i] = Engine.clock
            if not kids[i]:
                return
            i = kids[i][0]

    with warnings.catch_warnings():
        # 4.1 deprecates Actor.create for Engine.add_actor, whose binding takes no function yet
        warnings.simplefilter("ignore", DeprecationWarning)
        for i, f in enumerate(flows):
            if f[3] < 0:
                Actor.create(f"chain{i}", ends[i][0], chain, i)
    engine.run()
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(done, fh)


def main_child(argv: list[str]) -> int:
    kind, path, out = argv[0], argv[1], (argv[2] if len(argv) > 2 else None)
    {"flowsim": child_flowsim, "simgrid": child_simgrid}[kind](path, out)
    return 0


# -- the parent ------------------------------------------------------------------------------------
def timed(cmd: list[str]) -> tuple[float, float]:
    """Run ``cmd`` to completion; return its wall time and its CPU time (user + system)."""
    before = os.times()
    t0 = time.perf_counter()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - t0
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system)
    return wall, cpu


def naive_done(data: dict) -> list[float]:
    """The naive baseline's completion times, computed in this process (for the error column)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_flowsim import replay_naive

    return replay_naive(data)


def simgrid_available() -> bool:
    try:
        import simgrid  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        return main_child(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=list(SIZES), metavar="C",
                        help=f"concurrency levels (default: {' '.join(map(str, SIZES))})")
    parser.add_argument("--repeat", type=int, default=3, metavar="N",
                        help="alternating runs of each simulator per workload (default 3)")
    parser.add_argument("--no-naive", action="store_true", help="skip the naive baseline")
    parser.add_argument("--naive-max", type=int, default=2000, metavar="C",
                        help="run the naive baseline only up to this concurrency (default 2000; "
                             "at 5,000 one run takes several minutes)")
    parser.add_argument("--flows", type=int, default=10_000, metavar="N",
                        help="flows per workload (default 10,000, the shipped sets' size; "
                             "another value generates every workload)")
    parser.add_argument("--check", action="store_true",
                        help="also compare flowsim's completion times with the naive baseline's "
                             "on generated workloads (computed once, in this process)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: expected at least 1 run")
    if args.flows < 1:
        parser.error(f"--flows {args.flows}: expected at least 1 flow")
    for c in args.sizes:
        if c < 1:
            parser.error(f"--sizes: {c} is not a positive concurrency")
    simgrid = simgrid_available()
    print(f"whole-process times, best of {args.repeat} alternating runs; SimGrid: "
          f"{'yes' if simgrid else 'not installed (import simgrid failed), skipped'}")
    print(f"{'flows at once':>13} {'flowsim s':>10} {'cpu s':>6} {'naive s':>8} {'cpu s':>6} "
          f"{'ratio':>7} {'pairs':>11} {'cpu ratio':>9} {'err':>9}", flush=True)
    me = str(Path(__file__).resolve())
    with tempfile.TemporaryDirectory(prefix="bench-concurrency-") as tmp_name:
        tmp = Path(tmp_name)
        for c in args.sizes:
            path, from_simgrid = workload_file(c, tmp, args.flows)
            done_out, sg_out = tmp / f"done_c{c}.json", tmp / f"simgrid_c{c}.json"
            fs, nv, sg = [], [], []
            run_naive = not args.no_naive and c <= args.naive_max
            for _ in range(args.repeat):
                fs.append(timed([sys.executable, me, "--child", "flowsim", str(path),
                                 str(done_out)]))
                if simgrid:
                    try:
                        sg.append(timed([sys.executable, me, "--child", "simgrid", str(path),
                                         str(sg_out)]))
                    except subprocess.CalledProcessError as exc:
                        print(f"SimGrid run failed ({exc}); SimGrid skipped")
                        simgrid = False
                if run_naive:
                    nv.append(timed([sys.executable, str(NAIVE), str(path)]))
            with open(done_out, encoding="utf-8") as fh:
                done = json.load(fh)
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
            err = math.nan  # printed as "-": not checked (--check compares with the baseline)
            if from_simgrid:
                err = max(abs(a - b) / b for a, b in zip(done, data["done"], strict=True))
            elif args.check:
                ref = naive_done(data)
                err = max(abs(a - b) / b for a, b in zip(done, ref, strict=True))
            fs_wall, fs_cpu = min(w for w, _ in fs), min(u for _, u in fs)
            if sg:
                sg_wall = min(w for w, _ in sg)
                with open(sg_out, encoding="utf-8") as fh:
                    sg_done = json.load(fh)
                # SimGrid against flowsim on generated sets (the shipped ones' done times are
                # SimGrid's own, so there it is checked against them)
                ref = data["done"] if from_simgrid else done
                sg_err = max(abs(a - b) / b for a, b in zip(sg_done, ref, strict=True))
                pairs = [b[0] / a[0] for a, b in zip(fs, sg, strict=True)]
                print(f"{'':>13} SimGrid {sg_wall:.2f} s (cpu {min(u for _, u in sg):.2f}): "
                      f"flowsim {sg_wall / fs_wall:.2f}x SimGrid's speed (pairs "
                      f"{min(pairs):.2f}-{max(pairs):.2f}x); SimGrid's times vs "
                      f"{'the file' if from_simgrid else 'flowsim'} {sg_err:.1e}", flush=True)
            if nv:
                nv_wall, nv_cpu = min(w for w, _ in nv), min(u for _, u in nv)
                pairs = [b[0] / a[0] for a, b in zip(fs, nv, strict=True)]
                print(f"{c:>13,} {fs_wall:>10.2f} {fs_cpu:>6.2f} {nv_wall:>8.2f} {nv_cpu:>6.2f} "
                      f"{nv_wall / fs_wall:>6.1f}x {min(pairs):>4.1f}-{max(pairs):.1f}x "
                      f"{nv_cpu / fs_cpu:>8.1f}x {error_text(err):>9}", flush=True)
            else:
                print(f"{c:>13,} {fs_wall:>10.2f} {fs_cpu:>6.2f} {'-':>8} {'-':>6} {'-':>7} "
                      f"{'-':>11} {'-':>9} {error_text(err):>9}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
