"""The runtime that real ranks run: RCollective, the transports it runs over, and RTuner.

Shared by the emulator (:mod:`react.backends.emu`) and the GPU backend
(:mod:`react.backends.gpu`, which reuses the schedule and timings). It imports nothing from the
simulator (flowsim). Pieces, one module each:

- :mod:`react.runtime.clock` — the one clock every rank timestamps with;
- :mod:`react.runtime.timings` — what one rank measured in one epoch, and how the tuner merges
  every rank's measurements into the :class:`~react.model.observation.EpochResult` the controller
  reads;
- :mod:`react.runtime.transport` — the small point-to-point interface RCollective needs;
- :mod:`react.runtime.schedule` / :mod:`react.runtime.collective` — Algorithm 2 on one rank;
- :mod:`react.runtime.socket_transport`, :mod:`react.runtime.torch_transport` — transports;
- :mod:`react.runtime.channel`, :mod:`react.runtime.tuner` — the control channel and RTuner;
- :mod:`react.runtime.rank` — one rank's process (RCollective epoch after epoch under RTuner);
- :mod:`react.runtime.launcher` — a job's processes (the leader, one per rank) started, watched
  and killed the same way for the emulator's and the GPU backend's jobs;
- :mod:`react.runtime.reference` — what each collective must leave in a buffer, in numpy;
- :mod:`react.runtime.selfcheck` — every generator run for real and checked against it;
- :mod:`react.runtime.local` — N local rank processes for tests; :mod:`react.runtime.bench` —
  RCollective's collective time against torch's own ``all_reduce``.

It depends on the controller only through RTuner: the leader makes the job's controller from its
reference (:mod:`react.control.policies`) and runs it; see docs/runtime.md.
"""
