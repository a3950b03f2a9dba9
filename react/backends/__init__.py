"""Engines that run a collective's epochs: ``sim``, ``ns3``, ``emu``, ``gpu``.

Each subpackage opens with what it needs installed and how it starts and stops, owns its
settings table (``spec.py``: the scenario's ``[sim]``, ``[ns3]``, ``[emu]`` or ``[gpu]`` table,
pure data and validation), and takes plain values, never a scenario: a scenario is translated
into them in :mod:`react.run.worlds`. A stepped engine implements
:class:`react.control.backend.Backend` (the driver asks for epochs and hands their
:class:`~react.model.observation.EpochResult` to the tuning loop); one that runs real ranks
implements :class:`react.control.backend.TunedBackend` (the controller runs in RTuner's leader).
Importing this package imports none of them.
"""
