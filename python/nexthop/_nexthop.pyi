"""Type stubs of the compiled module (see ``help(nexthop.X)`` for details)."""

import os
from typing import Iterable, Mapping, Optional, Union

import numpy as np
import numpy.typing as npt

_Path = Union[str, "os.PathLike[str]"]

NO_ROUTE: int
"""What ``Lpm.lookup_many`` writes where no prefix matches (2**32 - 1)."""
MISS: int
"""What ``FlatFib.lookup_many_raw`` writes for a name the check bits reject (2**64 - 1)."""

class Error(Exception):
    """Base class of the errors nexthop raises besides ValueError, TypeError and OSError."""

class FormatError(Error):
    """A table file or FIB directory is of the wrong kind, corrupted or inconsistent."""

class UpdateError(Error):
    """A table update was refused; the table is unchanged."""

class Lpm:
    """An IPv4 and IPv6 longest-prefix-match table (Bloomfwd)."""

    @staticmethod
    def from_routes(
        pairs: Union[Iterable[tuple[str, int]], Mapping[str, int]], v6_levels: int = 12
    ) -> "Lpm":
        """Build from ``(prefix_text, next_hop)`` pairs, IPv4 and IPv6 mixed."""
    @staticmethod
    def from_file(path: _Path, asn: bool = False, v6_levels: int = 12) -> "Lpm":
        """Build from a route file (plain or gzip); ``asn=True`` for ``prefix/len<TAB>asn`` files."""
    @staticmethod
    def load(path: _Path) -> "Lpm":
        """Open a table file of ``nexthop lpm build`` or ``Lpm.save``."""
    def save(self, path: _Path) -> None:
        """Write the table file, replacing ``path`` atomically."""
    def lookup(self, addr: str) -> Optional[int]:
        """The next hop of the longest matching prefix, or None."""
    def lookup_many(
        self, addrs: Union[npt.NDArray[np.uint32], npt.NDArray[np.uint8]]
    ) -> npt.NDArray[np.uint32]:
        """Batched lookups: uint32 IPv4 addresses or (n, 16) uint8 IPv6 rows; NO_ROUTE for a miss."""
    def announce(self, prefix: str, next_hop: int) -> bool:
        """Add or replace the route of ``prefix``; True when the table changed."""
    def withdraw(self, prefix: str) -> bool:
        """Remove the route of ``prefix``; False when it was absent."""
    def apply_updates(self, path: _Path) -> dict[str, int]:
        """Apply an update stream file (``time a|w prefix [next-hop]``), all or nothing."""
    def stats(self, samples: int = 100000) -> dict[str, dict]:
        """``nexthop lpm stats --json``: ``{"ipv4": {...}, "ipv6": {...}}``."""
    def routes(self) -> list[tuple[str, int]]:
        """The routes as ``(prefix_text, next_hop)``, IPv4 first."""
    def __len__(self) -> int: ...
    def __contains__(self, addr: str) -> bool: ...

class FlatFib:
    """A flat-name FIB (Othello / Concise) of one key type."""

    @staticmethod
    def build(
        pairs: Union[Iterable[tuple[str, str]], Mapping[str, str]],
        key_type: str,
        value_bits: int = 8,
        check_bits: int = 0,
        sizing: str = "pow2",
        seed: Optional[int] = None,
    ) -> "FlatFib":
        """Build from ``(name, action)`` pairs; key types mac, ipv4, ipv6, u64, str."""
    @staticmethod
    def open(dir: _Path) -> "FlatFib":
        """Open a FIB directory of ``nexthop fib build`` or ``FlatFib.save``."""
    def save(self, dir: _Path) -> int:
        """Write a new generation of the FIB directory ``dir``; returns the generation."""
    def lookup(self, name: str) -> str:
        """The action of ``name`` (data plane); ``"miss"`` when the check bits reject it."""
    def lookup_many(self, names: list[str]) -> list[str]:
        """Batched ``lookup``."""
    def lookup_many_raw(
        self, names: Union[npt.NDArray[np.uint64], list[str]]
    ) -> npt.NDArray[np.uint64]:
        """Batched lookups returning raw action ids (``MISS`` for a rejected name)."""
    def actions(self) -> list[str]:
        """The action table: ``actions()[id]`` is the action of raw id ``id``."""
    def get(self, name: str) -> Optional[str]:
        """The exact action of ``name`` (control plane), or None."""
    def insert(self, name: str, action: str) -> None:
        """Add ``name``; UpdateError when present."""
    def delete(self, name: str) -> None:
        """Delete ``name``; UpdateError when absent."""
    def update(self, name: str, action: str) -> None:
        """Change the action of ``name``; UpdateError when absent."""
    def stats(self) -> dict[str, object]:
        """``nexthop fib stats --json`` (bits per key, sizes, seed, counters)."""
    def items(self) -> list[tuple[str, str]]:
        """All ``(name, action)`` pairs."""
    @property
    def key_type(self) -> str:
        """The key type name."""
    def __len__(self) -> int: ...
    def __contains__(self, name: str) -> bool: ...

class NameFib:
    """An NDN name FIB (longest-name-prefix match)."""

    @staticmethod
    def build(
        pairs: Union[Iterable[tuple[str, list[int]]], Mapping[str, list[int]]],
        max_components: Optional[int] = None,
    ) -> "NameFib":
        """Build from ``(uri, faces)`` pairs."""
    def lookup(self, uri: str) -> Optional[tuple[str, list[int]]]:
        """``(matched_prefix_uri, faces)`` of the longest matching rule, or None."""
    def lookup_many(self, uris: list[str]) -> list[Optional[tuple[str, list[int]]]]:
        """Batched ``lookup``."""
    def insert(self, uri: str, faces: list[int]) -> None:
        """Add or replace rule ``uri``."""
    def remove(self, uri: str) -> None:
        """Delete rule ``uri``; UpdateError when absent."""
    def stats(self) -> dict[str, int]:
        """Rules, keys, markers, bytes."""
    def __len__(self) -> int: ...
