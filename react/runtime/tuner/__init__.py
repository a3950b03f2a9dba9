"""RTuner (paper §6.2-6.3): the REACT controller run by a leader, fed by every rank, over TCP.

Modules: :mod:`~react.runtime.tuner.leader` (the leader),
:mod:`~react.runtime.tuner.command` (the leader as a process: its spec file, which carries the
controller by reference, starting it, its command line), :mod:`~react.runtime.tuner.client` (a
rank's end), :mod:`~react.runtime.tuner.messages` (what both write and read: fingerprints,
decisions, the result file).

The leader (:class:`TunerLeader`, its own process: ``python -m react.runtime.tuner --spec
SPEC.json --out RESULT.json``) accepts one control connection per rank
(:mod:`react.runtime.channel`), estimates each rank's clock offset, merges every epoch's
:class:`~react.runtime.timings.RankEpochTimings` into an
:class:`~react.model.observation.EpochResult` (:func:`~react.runtime.timings.merge_epoch`, with
the pattern that epoch ran) and hands it to a :class:`~react.control.loop.TuningLoop`, the same
closed loop the simulator's jobs use, with any controller the policies loader makes
(:func:`react.control.policies.make_controller`: REACT, a baseline, a user's factory,
guarded). Each rank runs a :class:`TunerClient`: :meth:`TunerClient.report` hands an
epoch's timings to a background thread and returns at once; :meth:`TunerClient.pattern_for`
names the pattern an epoch runs.

When a pattern change takes effect, and why nobody waits (§6.3)
    A decision taken on the result of epoch ``e`` switches every rank at epoch
    ``E = e + 1 + apply_delay_epochs`` (default 5). The leader answers every batch: ``switch``
    (new pattern and ``E``) or ``keep``, and each answer says after which epoch the next decision
    can come (``next_decision_epoch``, ``n``). A rank therefore knows its pattern for every epoch
    up to ``n + apply_delay_epochs``; :meth:`TunerClient.pattern_for` blocks only for a later
    epoch (the leader is more than the delay behind), and counts and times such waits. With
    reports sent as soon as each epoch ends and the delay of 5 epochs, the answer arrives while
    the ranks run the 5 epochs in between, so no rank waits.

Failures: the job always finishes
    Every wait is bounded by ``timeout_s``. On any failure a rank *freezes*: it logs the reason
    once (:attr:`TunerClient.failure`), never waits for the leader again and keeps its current
    pattern; a switch it had already accepted still takes effect at its epoch (and so does a
    valid one arriving in time over a channel that still works, after a timeout: that keeps it
    with its peers). Causes: the leader's connection fails (EOF when the leader process dies, a
    socket error, a malformed or oversize message), no answer within ``timeout_s``, a ``stop``
    from the leader, or a switch it rejects.
    A received pattern is used only if it parses, passes :func:`react.model.verify.verify`,
    implements the same collective (kind, ranks, chunks, root) as the job's pattern and switches
    at an epoch the rank has not run yet; otherwise the rank logs why, sends ``reject`` and
    freezes. The leader, on a ``reject``, a lost rank or a timing record it cannot merge, stops
    tuning (sends ``stop`` to every rank; a switch already sent still happens where it was
    accepted) and goes on collecting what it can, merging each epoch with the pattern its ranks
    report.

Where ranks may disagree, and how it shows
    Every rank receives the same bytes and runs the same deterministic checks, so a rejection
    of the pattern itself happens on every rank or on none. What can split the ranks is the
    leader dying in the middle of broadcasting a switch (some ranks got it, others not), or a
    switch that reaches one rank too late (it timed out waiting, ran on, and rejects it while
    its peers switch). Such ranks run different patterns from epoch ``E`` on
    (RCollective then fails or times out: the patterns do not match). It is detectable: every
    ``timings`` report carries the fingerprint (:func:`pattern_fingerprint`) of the pattern the
    rank ran, the leader records ``diverged`` in the result when the fingerprints of one epoch
    differ, and each client keeps ``(epoch, fingerprint)`` in :attr:`TunerClient.history`.

Wire protocol (newline-delimited JSON objects, :mod:`react.runtime.channel`)
    rank -> leader:
        ``{"type": "hello", "rank": r, "version": 1, "clock": ID}`` (``clock``: the rank's
        :func:`react.runtime.clock.clock_id`, or null; a rank on the leader's clock gets offset 0);
        ``{"type": "pong", "seq": k, "t_rank_s": t}`` (answer to a ping, the rank's clock);
        ``{"type": "timings", "timings": RankEpochTimings.to_dict(), "pattern": fingerprint,
        "waited_s": w}`` (one per epoch);
        ``{"type": "reject", "epoch": E, "reason": text}``;
        ``{"type": "bye", "epochs": k, "waited_epochs": m, "waited_s": s, "report_s": s,
        "failure": text | null}``.
    leader -> rank:
        ``{"type": "ping", "seq": k}`` (``PINGS`` times at connection);
        ``{"type": "welcome", "batch_epochs": B | null, "apply_delay_epochs": d,
        "next_decision_epoch": n | null, "pattern": Pattern.to_dict(), "offset_s": o}``;
        ``{"type": "keep", "through_epoch": e, "next_decision_epoch": n | null, "decision": D}``;
        ``{"type": "switch", "epoch": E, "through_epoch": e, "next_decision_epoch": n,
        "pattern": Pattern.to_dict(), "decision": D}``;
        ``{"type": "stop", "reason": text}``; ``{"type": "error", "reason": text}`` (hello refused).
    ``D`` is ``{"batch", "action", "reason", "swaps"}``; ``null`` for ``next_decision_epoch``
    means no decision will ever come (no controller, or tuning stopped).

Clock offsets
    At connection the leader pings the rank ``PINGS`` times; with ``t0``/``t1`` the leader's
    clock when a ping left and its pong came back and ``t`` the rank's stamp in the pong, the
    sample with the smallest round trip gives ``offset = (t0 + t1) / 2 - t`` (NTP), added to every
    stamp of that rank before merging. On one host it is a few microseconds.

Result file (``--out``, :meth:`TunerLeader.run` returns the same document)
    ``{"format": "react-tuner-result/1", "complete": bool, "world_size": n,
    "message_bytes": m, "batch_epochs": B | null, "apply_delay_epochs": d,
    "patterns": [Pattern.to_dict(), ...]`` (each pattern the job ran, once; index 0 the initial),
    ``"fingerprints": [...]`` (same order), ``"epochs": [{"epoch": e, "pattern": i,
    "collective_time_s": t, "message_bytes": m, "flows": [[start_s, end_s, size_bytes], ...]``
    (in the pattern's flow order), ``"waited_s": w`` (longest wait of any rank for this epoch),
    ``"merge_s": s}, ...]``, ``"decisions": [{"batch", "after_epoch", "action", "reason",
    "pattern": i, "switch_epoch": E | null, "swaps": [{"kind", ...fields}], "estimated_gain",
    "observed_gain", "mean_time_s", "merge_s", "decide_s", "send_s", "overhead_s",
    "latency_s"}, ...]`` (``overhead_s`` = merge + decide + send: the leader's work per batch;
    ``latency_s``: from the batch's last report arriving to the answer sent), ``"offsets_s":
    {"r": s}``, ``"rtt_s": {"r": s}``, ``"epochs_waited": k`` (epochs in which any rank waited),
    ``"ranks": {"r": bye fields}``, ``"events": [text, ...]}`` (rejections, failures,
    divergence). Non-finite numbers are written as ``null``. :func:`read_result` reads it back,
    with a decision's ``"report"`` (the congestion it acted on,
    :func:`~react.runtime.tuner.messages.report_to_dict`) where the row has one, else None.
"""


from react.runtime.tuner.client import TunerClient
from react.runtime.tuner.command import leader_from_spec, main, spawn_leader, tuner_spec
from react.runtime.tuner.leader import TunerLeader
from react.runtime.tuner.messages import PINGS, RESULT_FORMAT, pattern_fingerprint, read_result

__all__ = [
    "PINGS",
    "RESULT_FORMAT",
    "TunerClient",
    "TunerLeader",
    "leader_from_spec",
    "main",
    "pattern_fingerprint",
    "read_result",
    "spawn_leader",
    "tuner_spec",
]
