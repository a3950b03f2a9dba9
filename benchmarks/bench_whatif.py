"""What-if studies at scale: how long they take and where the time goes.

The shipped scenarios ``experiments/scenarios/whatif_*.toml`` are written by this script
(``--write``) so that their 200-500 background flows come from one seeded draw:

- ``whatif_alibaba_{32,64,128,240}.toml``: the 720-server Alibaba-style fabric, three jobs of N
  ranks each (NCCL's dual binary tree AllReduce, ring AllReduce, recursive-doubling AllGather),
  random placement, 20 MB, 4 ECMP connections, 200 long-lived background flows between random
  servers, 20 epochs, REACT on for every job;
- ``whatif_fat_tree_512.toml``: a 512-rank dual binary tree AllReduce on the k=16 fat-tree (1,024
  hosts), random placement, 20 MB, 500 long-lived background flows, two core-aggregation
  ("spine") links degraded to 25 Gb/s, 100 epochs with REACT.

For each scenario it runs ``react run`` as a whole process (start-up included), prints the wall
and CPU time and the peak memory (max RSS), and with ``--profile`` the share of the run spent in
each part: the flow simulator (flowsim and SimPy), the job driver and pattern execution, the
controller (detection, critical paths, estimate) and the swap space (swap search and
verification), from ``cProfile``'s own time per source file.

Usage::

    python benchmarks/bench_whatif.py --write                     # (re)write the scenario files
    python benchmarks/bench_whatif.py whatif_alibaba_32 whatif_alibaba_64 --epochs 5
    python benchmarks/bench_whatif.py whatif_alibaba_32 --profile --epochs 3
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

import numpy as np

from react.run.child_usage import run_measured

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "experiments" / "scenarios"
ALIBABA_RANKS = (32, 64, 128, 240)
ALIBABA_HOSTS = 720
FAT_TREE_HOSTS = 1024
JOBS = (("tree", "allreduce_double_binary_tree"), ("ring", "allreduce_ring"),
        ("rd", "allgather_recursive_doubling"))

HEADER = ("# Written by benchmarks/bench_whatif.py --write (its docstring describes the setting);\n"
          "# run it with: react run {path}\n")


def _background(hosts: int, count: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        src, dst = rng.choice(hosts, size=2, replace=False)
        out.append(f'[[background]]\nkind = "long_lived"\nsrc = "h{src}"\ndst = "h{dst}"\n')
    return "\n".join(out)


def alibaba_scenario(ranks: int) -> str:
    """The 3-job what-if on the 720-server fabric, ``ranks`` ranks per job, as TOML."""
    jobs = "".join(
        f'[[jobs]]\nname = "{name}"\ncollective = "{collective}"\nranks = {ranks}\n'
        f'placement = "random"\nmessage_bytes = 20e6\nepochs = 20\nseed = {i + 1}\n'
        f'react = true\n\n'
        for i, (name, collective) in enumerate(JOBS))
    return (f'name = "whatif-alibaba-{ranks}"\n'
            f'description = "3 jobs x {ranks} ranks (tree, ring, RD AllGather), 20 MB, 200 '
            f'background flows, 720-server Alibaba fabric"\n'
            f'seed = 0\nconnections = 4\n\n[topology]\nname = "alibaba_fabric"\n\n'
            + jobs + _background(ALIBABA_HOSTS, 200, seed=7))


def fat_tree_scenario() -> str:
    """The 512-rank dual-tree what-if on the k=16 fat-tree, as TOML."""
    return ('name = "whatif-fat-tree-512"\n'
            'description = "512-rank dual binary tree AllReduce, 20 MB, 500 background flows, '
            '2 degraded spine links, k=16 fat-tree"\n'
            'seed = 0\nconnections = 4\n\n[topology]\nname = "fat_tree"\nk = 16\n\n'
            '[[jobs]]\nname = "tree"\ncollective = "allreduce_double_binary_tree"\n'
            'ranks = 512\nplacement = "random"\nmessage_bytes = 20e6\nepochs = 100\nseed = 1\n'
            'react = true\n\n'
            '[[failures]]\nlink = "core0->agg0"\ncapacity_bps = 25e9\n\n'
            '[[failures]]\nlink = "core9->agg17"\ncapacity_bps = 25e9\n\n'
            + _background(FAT_TREE_HOSTS, 500, seed=8))


def scenario_texts() -> dict[str, str]:
    texts = {f"whatif_alibaba_{n}": alibaba_scenario(n) for n in ALIBABA_RANKS}
    texts["whatif_fat_tree_512"] = fat_tree_scenario()
    return texts


def write_scenarios(folder: Path = SCENARIOS) -> list[Path]:
    written = []
    for name, text in scenario_texts().items():
        path = folder / f"{name}.toml"
        rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        path.write_text(HEADER.format(path=rel) + text, encoding="utf-8")
        written.append(path)
    return written


# -- timing ----------------------------------------------------------------------------------------
PARTS = (
    ("flow simulator (flowsim, SimPy)", ("flowsim/", "simpy/")),
    ("swap space (swapspace, replay, transforms, verify)", ("react/model/swapspace/",
                                                             "react/model/replay/",
                                                             "react/model/transforms.py",
                                                             "react/model/verify.py")),
    ("controller (detect, critical, estimate, gates)", ("react/control/controller.py",
                                                        "react/control/detect.py",
                                                        "react/model/critical.py",
                                                        "react/control/estimate.py",
                                                        "react/model/execution.py")),
    ("job driver, pattern execution, patterns", ("react/backends/", "react/run/driver.py",
                                                 "react/control/loop.py", "react/model/pattern.py",
                                                 "react/patterns/")),
    ("numpy", ("numpy/",)),
)


def profile_parts(path: Path, epochs: int | None) -> tuple[float, list[tuple[str, float]]]:
    """Run the scenario in this process under cProfile; own time per part of the system."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from react.cli import main

    argv = ["run", str(path), "--no-progress"] + (["--epochs", str(epochs)] if epochs else [])
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    with open(os.devnull, "w", encoding="utf-8") as sink:
        stdout, sys.stdout = sys.stdout, sink
        try:
            prof.runcall(main, argv)
        finally:
            sys.stdout = stdout
    total = time.perf_counter() - t0
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    other_name = "everything else (imports, reports, ...)"
    own = {name: 0.0 for name, _ in PARTS}
    own[other_name] = 0.0

    def part_of(filename: str) -> str:
        fname = filename.replace(os.sep, "/")
        for name, keys in PARTS:
            if any(k in fname for k in keys):
                return name
        return other_name

    for (filename, _line, _func), (_cc, _nc, tottime, _ct, callers) in stats.items():
        if filename == "~" and callers:
            # A builtin (a numpy ufunc, a dict method): its time goes to whoever called it.
            for (caller_file, _l, _f), (_c, _n, tt, _t) in callers.items():
                own[part_of(caller_file)] += tt
        else:
            own[part_of(filename)] += tottime
    return total, list(own.items())


def run_whole(path: Path, epochs: int | None) -> tuple[float, float, float]:
    """``react run`` as a child process: wall seconds, CPU seconds, peak RSS in MiB."""
    cmd = [sys.executable, "-m", "react", "run", str(path), "--no-progress"]
    if epochs:
        cmd += ["--epochs", str(epochs)]
    done = run_measured(cmd, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr}")
    return done.wall_s, done.cpu_s, done.peak_rss_bytes / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", metavar="NAME",
                        help="scenario names (default: every whatif_* scenario)")
    parser.add_argument("--write", action="store_true",
                        help="(re)write experiments/scenarios/whatif_*.toml and stop")
    parser.add_argument("--epochs", type=int, default=None, metavar="N",
                        help="run N epochs instead of the file's value (a quicker look)")
    parser.add_argument("--profile", action="store_true",
                        help="also profile one in-process run: own time per part of the system")
    args = parser.parse_args(argv)
    if args.write:
        for path in write_scenarios():
            print(f"wrote {path.relative_to(ROOT)}")
        return 0
    if args.epochs is not None and args.epochs < 1:
        parser.error(f"--epochs {args.epochs}: expected a positive number of epochs")
    names = args.scenarios or list(scenario_texts())
    for name in names:
        path = SCENARIOS / f"{name}.toml"
        if not path.exists():
            parser.error(f"no scenario {path}; expected one of {', '.join(scenario_texts())}")
        wall, cpu, rss = run_whole(path, args.epochs)
        epochs = f"{args.epochs} epochs" if args.epochs else "the file's epochs"
        print(f"{name} ({epochs}): {wall:.1f} s wall, {cpu:.1f} s CPU, peak RSS {rss:.0f} MiB",
              flush=True)
        if args.profile:
            total, parts = profile_parts(path, args.epochs)
            own_sum = sum(t for _, t in parts)
            print(f"  profile (in process, under cProfile: {total:.1f} s):")
            for part, seconds in parts:
                print(f"    {part:<48} {seconds:7.1f} s {seconds / own_sum:6.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
