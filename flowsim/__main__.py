"""The ``flowsim`` command line: a small demo, and building / inspecting topologies.

``python3 -m flowsim demo`` runs a tiny scenario and prints one row per flow;
``python3 -m flowsim topology fat_tree --k 8 --out ft.json`` builds a fabric, prints a summary and
saves it as JSON (``flowsim topology file ft.json`` reads one back). Rates are given in Gbps and
latencies in µs on the command line (option names say so) and converted to the library's bits per
second and seconds. This module is the only place where builders are looked up by name.

Bad input prints one line ``flowsim: error: ...`` on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import inspect
import math
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TextIO

from flowsim.errors import FlowsimError
from flowsim.records import FlowRecord
from flowsim.routing import Router
from flowsim.topologies import (
    DEFAULT_BPS,
    DEFAULT_LATENCY_S,
    alibaba_fabric,
    fat_tree,
    leaf_spine,
    star,
)
from flowsim.topology import Topology

__all__ = ["build_parser", "main"]

EXIT_USAGE = 2


class _UsageError(Exception):
    """Bad command-line input; reported in one line with exit status 2."""


class _Parser(argparse.ArgumentParser):
    # argparse prints the whole usage and exits from inside parse_args; report one line instead.
    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{message} (see '{self.prog} --help')")


# -- topology builders by name (the CLI edge) ------------------------------------------------------
def _gbps(value: float | None) -> float | None:
    return None if value is None else value * 1e9


def _us(value: float | None) -> float | None:
    return None if value is None else value * 1e-6


def _given(**kwargs: Any) -> dict[str, Any]:
    """Keyword arguments the user gave; the others keep the builder's own default."""
    return {k: v for k, v in kwargs.items() if v is not None}


def _build_star(a: argparse.Namespace) -> Topology:
    return star(**_given(n=a.n, capacity_bps=_gbps(a.capacity_gbps), latency_s=_us(a.latency_us)))


def _build_leaf_spine(a: argparse.Namespace) -> Topology:
    return leaf_spine(
        **_given(
            leaves=a.leaves,
            spines=a.spines,
            hosts_per_leaf=a.hosts_per_leaf,
            host_bps=_gbps(a.host_gbps),
            fabric_bps=_gbps(a.fabric_gbps),
            oversubscription=a.oversubscription,
            latency_s=_us(a.latency_us),
        )
    )


def _build_fat_tree(a: argparse.Namespace) -> Topology:
    return fat_tree(
        **_given(
            k=a.k,
            host_bps=_gbps(a.host_gbps),
            edge_agg_bps=_gbps(a.edge_agg_gbps),
            agg_core_bps=_gbps(a.agg_core_gbps),
            latency_s=_us(a.latency_us),
        )
    )


def _build_alibaba_fabric(a: argparse.Namespace) -> Topology:
    return alibaba_fabric(
        **_given(
            tors=a.tors,
            aggs=a.aggs,
            hosts_per_tor=a.hosts_per_tor,
            host_bps=_gbps(a.host_gbps),
            fabric_bps=_gbps(a.fabric_gbps),
            latency_s=_us(a.latency_us),
        )
    )


def _load_file(a: argparse.Namespace) -> Topology:
    try:
        return Topology.load(a.path)
    except OSError as exc:
        raise _UsageError(f"cannot read topology file {a.path!r}: {exc.strerror}") from None


def _default(build: Callable[..., Topology], name: str) -> Any:
    """A builder's own default for ``name``, quoted in --help so the two never drift apart."""
    return inspect.signature(build).parameters[name].default


def _add_topology_parsers(sub: Any) -> None:
    def builder(name: str, help_text: str, build: Callable[[argparse.Namespace], Topology]) -> Any:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(build=build)
        p.add_argument("--out", metavar="FILE", help="also save the topology as JSON to FILE")
        return p

    p = builder("star", "n hosts on one switch s0", _build_star)
    p.add_argument("--n", type=int, help=f"number of hosts (default {_default(star, 'n')})")
    p.add_argument(
        "--capacity-gbps", type=float, help=f"host link rate (default {DEFAULT_BPS / 1e9:g})"
    )
    p.add_argument(
        "--latency-us", type=float, help=f"per-link latency (default {DEFAULT_LATENCY_S * 1e6:g})"
    )

    p = builder(
        "leaf_spine", "two-tier leaf-spine, every leaf cabled to every spine", _build_leaf_spine
    )
    p.add_argument(
        "--leaves",
        type=int,
        help=f"number of leaf switches (default {_default(leaf_spine, 'leaves')})",
    )
    p.add_argument(
        "--spines",
        type=int,
        help=f"number of spine switches (default {_default(leaf_spine, 'spines')})",
    )
    p.add_argument(
        "--hosts-per-leaf",
        type=int,
        help=f"hosts under each leaf (default {_default(leaf_spine, 'hosts_per_leaf')})",
    )
    p.add_argument(
        "--host-gbps", type=float, help=f"host link rate (default {DEFAULT_BPS / 1e9:g})"
    )
    rate = p.add_mutually_exclusive_group()
    rate.add_argument("--fabric-gbps", type=float, help="leaf-spine link rate (default host rate)")
    rate.add_argument(
        "--oversubscription", type=float, help="leaf host capacity over uplink capacity (1 = full)"
    )
    p.add_argument(
        "--latency-us", type=float, help=f"per-link latency (default {DEFAULT_LATENCY_S * 1e6:g})"
    )

    p = builder(
        "fat_tree", "Al-Fares k-ary fat-tree: k^3/4 hosts (k=8: 128, k=16: 1,024)", _build_fat_tree
    )
    p.add_argument(
        "--k",
        type=int,
        help=f"switch radix, a positive even integer (default {_default(fat_tree, 'k')})",
    )
    p.add_argument(
        "--host-gbps", type=float, help=f"host-edge link rate (default {DEFAULT_BPS / 1e9:g})"
    )
    p.add_argument("--edge-agg-gbps", type=float, help="edge-agg link rate (default host rate)")
    p.add_argument("--agg-core-gbps", type=float, help="agg-core link rate (default edge-agg)")
    p.add_argument(
        "--latency-us", type=float, help=f"per-link latency (default {DEFAULT_LATENCY_S * 1e6:g})"
    )

    p = builder(
        "alibaba_fabric",
        "the paper's Alibaba-trace fabric: ToRs x aggregation switches",
        _build_alibaba_fabric,
    )
    p.add_argument(
        "--tors",
        type=int,
        help=f"number of ToR switches (default {_default(alibaba_fabric, 'tors')})",
    )
    p.add_argument(
        "--aggs",
        type=int,
        help=f"number of aggregation switches (default {_default(alibaba_fabric, 'aggs')})",
    )
    p.add_argument(
        "--hosts-per-tor",
        type=int,
        help=f"servers under each ToR (default {_default(alibaba_fabric, 'hosts_per_tor')})",
    )
    p.add_argument(
        "--host-gbps", type=float, help=f"server link rate (default {DEFAULT_BPS / 1e9:g})"
    )
    p.add_argument(
        "--fabric-gbps", type=float, help=f"ToR-agg link rate (default {DEFAULT_BPS / 1e9:g})"
    )
    p.add_argument(
        "--latency-us", type=float, help=f"per-link latency (default {DEFAULT_LATENCY_S * 1e6:g})"
    )

    p = builder("file", "a topology saved as JSON (by --out or Topology.save)", _load_file)
    p.add_argument("path", help="JSON file to read")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``flowsim`` command."""
    parser = _Parser(
        prog="flowsim",
        description="flowsim: a max-min fair, flow-level network simulator.",
        epilog="Run 'flowsim COMMAND --help' for the options of a command.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo = sub.add_parser(
        "demo",
        help="run a small example scenario and print a table of flows",
        description=(
            "A leaf-spine with 8 hosts: four 25 MB flows of a job cross the spines by ECMP, a "
            "long-lived storage flow competes with one of them, and a spine link drops to 30 Gbps "
            "mid-run. Prints one row per flow and what to read in it."
        ),
    )
    demo.add_argument("--seed", type=int, default=0, help="ECMP hash seed (default 0)")
    demo.set_defaults(run=_cmd_demo)
    topo = sub.add_parser(
        "topology",
        help="build a topology, print a summary, optionally save it as JSON",
        description="Build a topology (or read one from JSON), print a summary, optionally save.",
        epilog="Example: flowsim topology fat_tree --k 8 --out ft.json",
    )
    topo.set_defaults(run=_cmd_topology)
    _add_topology_parsers(topo.add_subparsers(dest="builder", metavar="BUILDER", required=True))
    return parser


# -- topology command ------------------------------------------------------------------------------
def _fmt_gbps(bps: float) -> str:
    return f"{bps / 1e9:g} Gbps"


def describe(topology: Topology) -> list[str]:
    """Summary lines of a topology: counts per tier, link rates and latencies, an example route."""
    hosts = topology.hosts
    tiers: dict[str, int] = {}
    for name in topology.switches:
        tier = name.rstrip("0123456789") or name
        tiers[tier] = tiers.get(tier, 0) + 1
    rates: dict[float, int] = {}
    for link in topology.links:
        rates[link.capacity_bps] = rates.get(link.capacity_bps, 0) + 1
    latencies = sorted({link.latency_s for link in topology.links})
    lines = [
        topology.name or "(unnamed topology)",
        f"  hosts     {len(hosts):>6}  ({hosts[0]} .. {hosts[-1]})" if hosts else "  hosts 0",
        f"  switches  {len(topology.switches):>6}  ("
        + ", ".join(f"{tier} {count}" for tier, count in tiers.items())
        + ")",
        f"  links     {len(topology.links):>6}  directed ("
        + ", ".join(f"{count} x {_fmt_gbps(cap)}" for cap, count in sorted(rates.items()))
        + ")",
    ]
    if latencies:
        each = " / ".join(f"{lat * 1e6:g} us" for lat in latencies)
        lines.append(f"  latency           {each} per link")
    if len(hosts) >= 2:
        paths = Router(topology).paths(hosts[0], hosts[-1])
        lines.append(
            f"  routes            {hosts[0]} -> {hosts[-1]}: {len(paths)} equal-cost path"
            f"{'s' if len(paths) != 1 else ''} of {len(paths[0])} links"
        )
    return lines


def _cmd_topology(args: argparse.Namespace, out: TextIO) -> int:
    topology = args.build(args)
    if args.out:  # before printing anything, so that a bad path leaves only the error line
        try:
            topology.save(args.out)
        except OSError as exc:
            raise _UsageError(f"cannot write {args.out!r}: {exc.strerror}") from None
    for line in describe(topology):
        print(line, file=out)
    if args.out:
        print(f"saved to {args.out}", file=out)
    return 0


# -- demo command ----------------------------------------------------------------------------------
DEMO_SIZE_BYTES = 25e6
DEMO_DEGRADE_AT_S = 0.5e-3
DEMO_DEGRADED_BPS = 30e9


def run_demo(seed: int = 0) -> tuple[list[FlowRecord], dict[str, Any]]:
    """Run the demo scenario; return the flow records and the facts the explanation quotes."""
    from flowsim.network import Network  # imported here: the topology command does not need it
    from flowsim.traffic import long_lived

    topology = leaf_spine(leaves=2, spines=2, hosts_per_leaf=4)
    net = Network(topology, seed=seed)
    env = net.env
    storage = long_lived(net, "h3", "h7", tenant="storage", port=9)
    degraded = topology.link("spine0", "leaf1")
    net.schedule_link_capacity(DEMO_DEGRADE_AT_S, degraded.id, DEMO_DEGRADED_BPS)

    def job() -> Any:
        flows = [
            net.start_flow(f"h{i}", f"h{i + 4}", DEMO_SIZE_BYTES, port=i, tenant="job")
            for i in range(4)
        ]
        yield env.all_of(flows)
        storage.stop()  # the background transfer ends with the job, so the run ends

    env.process(job())
    env.run()
    records = sorted(net.records, key=lambda r: r.flow_id)
    facts = {
        "topology": topology,
        "degraded": degraded,
        "storage": storage,
        "alone_s": DEMO_SIZE_BYTES * 8 / topology.links[0].capacity_bps
        + 4 * topology.links[0].latency_s,
    }
    return records, facts


def _size(bytes_: float) -> str:
    return "inf" if math.isinf(bytes_) else f"{bytes_ / 1e6:.1f} MB"


def _via(router: Router, topology: Topology, record: FlowRecord) -> str:
    """The middle switch of a flow's path (the spine of a leaf-spine path), or '-'."""
    inner = router.path_nodes(record.path)[1:-1]
    return inner[len(inner) // 2] if inner else "-"


def flow_table(records: Sequence[FlowRecord], topology: Topology) -> list[str]:
    """One line per flow: id, tenant, endpoints, middle switch, size, start, end, mean rate.

    The mean rate is bytes delivered (sent bytes for a stopped flow) over ``end_s - start_s``.
    """
    router = Router(topology)
    header = (
        f"{'flow':>4}  {'tenant':<8} {'src->dst':<9} {'via':<7} {'size':>8} "
        f"{'start ms':>9} {'end ms':>9} {'mean Gbps':>9}"
    )
    lines = [header, "-" * len(header)]
    for r in records:
        duration = r.end_s - r.start_s
        sent = r.sent_bytes if r.stopped else r.size_bytes
        gbps = sent * 8 / duration / 1e9 if duration > 0 else float("nan")
        note = "  (stopped)" if r.stopped else ""
        lines.append(
            f"{r.flow_id:>4}  {r.tenant:<8} {r.src + '->' + r.dst:<9} "
            f"{_via(router, topology, r):<7} {_size(r.size_bytes):>8} {r.start_s * 1e3:>9.3f} "
            f"{r.end_s * 1e3:>9.3f} {gbps:>9.1f}{note}"
        )
    return lines


def _ids(records: Sequence[FlowRecord]) -> str:
    return ", ".join(str(r.flow_id) for r in records) or "none"


def explain_demo(records: Sequence[FlowRecord], facts: dict[str, Any]) -> list[str]:
    """What to read in the demo's table, from the run's own records (nothing hard-coded)."""
    topo: Topology = facts["topology"]
    degraded = facts["degraded"]
    router = Router(topo)
    job = [r for r in records if r.tenant == "job"]
    storage = [r for r in records if r.tenant == "storage"]
    spines: dict[str, list[FlowRecord]] = {}
    for r in records:
        spines.setdefault(_via(router, topo, r), []).append(r)
    spread = "; ".join(f"{name} carries flow(s) {_ids(rs)}" for name, rs in sorted(spines.items()))
    host_links = {lk.id for lk in topo.links if topo.is_host(lk.src) or topo.is_host(lk.dst)}
    lines = [
        "What happened:",
        f"- A job sends {len(job)} flows of {DEMO_SIZE_BYTES / 1e6:g} MB from leaf0 to leaf1; "
        f"alone on a path each would take {facts['alone_s'] * 1e3:.3f} ms.",
        f"- ECMP hashes (src, dst, port, seed) to pick a spine: {spread}. Flows on a common link "
        "share it max-min fairly, so a hash collision costs more than any path length.",
    ]
    for bg in storage:
        hit = [r for r in job if set(r.path) & set(bg.path) & host_links]
        lines.append(
            f"- The long-lived storage flow {bg.flow_id} ({bg.src}->{bg.dst}) also shares host "
            f"links with job flow(s) {_ids(hit)}; it is stopped when the job ends."
        )
    lines.append(
        f"- At {DEMO_DEGRADE_AT_S * 1e3:g} ms link {degraded.src}->{degraded.dst} drops to "
        f"{_fmt_gbps(DEMO_DEGRADED_BPS)} (a partial failure), slowing the flow(s) crossing it: "
        f"{_ids([r for r in records if degraded.id in r.path])}."
    )
    lines.append("Try another ECMP seed (--seed 1) to see the flows land on other spines.")
    return lines


def _cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    records, facts = run_demo(seed=args.seed)
    topo: Topology = facts["topology"]
    title = f"flowsim demo: {topo.name}, all links 100 Gbps, 1 us each (ECMP seed {args.seed})"
    print(title, file=out)
    print(file=out)
    for line in flow_table(records, topo):
        print(line, file=out)
    print(file=out)
    for line in explain_demo(records, facts):
        print(textwrap.fill(line, width=100, subsequent_indent="  "), file=out)
    return 0


# -- entry point -----------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``flowsim`` command; return its exit status (0 ok, 2 bad input).

    Errors in the user's input (bad options, invalid topology parameters, unreadable files) are
    reported as one line on stderr, without a traceback.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return int(args.run(args, sys.stdout))
    except SystemExit as exc:  # --help
        return int(exc.code or 0) if isinstance(exc.code, int | None) else EXIT_USAGE
    except (_UsageError, FlowsimError, OSError) as exc:
        print(f"flowsim: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
