"""nexthop's forwarding tables from Python.

- :class:`Lpm`: IPv4 and IPv6 longest-prefix match (Bloomfwd); batched
  lookups take numpy arrays and release the GIL.
- :class:`FlatFib`: exact-match flat names (Othello / Concise FIB) of one key
  type (``mac``, ``ipv4``, ``ipv6``, ``u64``, ``str``); opens and writes the
  FIB directories of ``nexthop fib build``.
- :class:`NameFib`: the NDN name FIB (longest-name-prefix match).
- NDN packets: :class:`Interest`, :class:`Data`, :class:`LpPacket` (with
  Nack) encode and decode; :func:`canonical_uri`, :func:`name_to_wire`,
  :func:`name_from_wire` for names.
- :func:`forwarder_stats`: a running forwarder's counters (``nexthop stats``).
- :class:`Controller`: push route changes to a running ``nexthop controller``
  and read its counters (its admin channel, with its key file).

Errors: malformed input raises :class:`ValueError`, a wrong type or dtype
:class:`TypeError`, an unreadable file :class:`OSError`; a corrupted or wrong
kind of file :class:`FormatError` and a refused update :class:`UpdateError`
(also a change a controller refuses), a failed controller handshake
:class:`ControlError`, all subclasses of :class:`Error`. The messages are the CLI's.
"""

from ._nexthop import (
    MISS,
    NO_ROUTE,
    ControlError,
    Controller,
    Data,
    Error,
    FlatFib,
    FormatError,
    Interest,
    LpPacket,
    Lpm,
    NameFib,
    UpdateError,
    canonical_uri,
    forwarder_stats,
    name_from_wire,
    name_to_wire,
)

__all__ = [
    "MISS",
    "NO_ROUTE",
    "ControlError",
    "Controller",
    "Data",
    "Error",
    "FlatFib",
    "FormatError",
    "Interest",
    "LpPacket",
    "Lpm",
    "NameFib",
    "UpdateError",
    "canonical_uri",
    "forwarder_stats",
    "name_from_wire",
    "name_to_wire",
]
