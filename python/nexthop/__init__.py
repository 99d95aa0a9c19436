"""nexthop's forwarding tables from Python.

- :class:`Lpm`: IPv4 and IPv6 longest-prefix match (Bloomfwd); batched
  lookups take numpy arrays and release the GIL.
- :class:`FlatFib`: exact-match flat names (Othello / Concise FIB) of one key
  type (``mac``, ``ipv4``, ``ipv6``, ``u64``, ``str``); opens and writes the
  FIB directories of ``nexthop fib build``.
- :class:`NameFib`: the NDN name FIB (longest-name-prefix match).

Errors: malformed input raises :class:`ValueError`, a wrong type or dtype
:class:`TypeError`, an unreadable file :class:`OSError`; a corrupted or wrong
kind of file :class:`FormatError` and a refused update :class:`UpdateError`,
both subclasses of :class:`Error`. The messages are the CLI's.
"""

from ._nexthop import (
    MISS,
    NO_ROUTE,
    Error,
    FlatFib,
    FormatError,
    Lpm,
    NameFib,
    UpdateError,
)

__all__ = [
    "MISS",
    "NO_ROUTE",
    "Error",
    "FlatFib",
    "FormatError",
    "Lpm",
    "NameFib",
    "UpdateError",
]
