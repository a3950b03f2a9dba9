"""MSCCL XML algorithms: export a :class:`~react.model.pattern.Pattern`, import one back.

MSCCL (msccl-tools, the MSCCL runtime in NCCL forks, TACCL's synthesised schedules) describes a
collective as an ``<algo>`` of ``<gpu>`` elements, each with threadblocks (``<tb>``, one send
peer and/or one receive peer on one channel) that run their ``<step>`` instructions in order
(``s`` send, ``r`` receive, ``rrc`` receive-reduce-copy, the fused ``rcs``/``rrs``/``rrcs``,
local ``cpy``/``re``, ``nop``), waiting for at most one step of another threadblock each
(``depid``/``deps``). Buffers are counted in equal chunks (``i_chunks``, ``o_chunks``,
``nchunksperloop``). The k-th send of a threadblock to peer p on channel c is received by the k-th
receive of p's threadblock that receives from us on channel c.

:func:`to_msccl_xml` writes a pattern in that form; :func:`from_msccl_xml` reads one (ours or
anyone's) and checks it, so a malformed or unsound algorithm is rejected naming the GPU,
threadblock and step at fault. What MSCCL cannot say (REACT's logical step of each message,
which chunks form one REACT chunk, the root, the generator's name) is written as extra
``react_*`` attributes that MSCCL runtimes ignore, so ``from_msccl_xml(to_msccl_xml(p)) == p``.
Without them (a file from elsewhere) every MSCCL chunk is a chunk and each message's step is the
earliest the program's order allows.
"""

from react.msccl.export import to_msccl_xml, write_msccl
from react.msccl.load import from_msccl_xml, read_msccl

__all__ = ["from_msccl_xml", "read_msccl", "to_msccl_xml", "write_msccl"]
