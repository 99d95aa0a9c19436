"""Type stubs of the compiled module (see ``help(nexthop.X)`` for details)."""

import os
from typing import Any, Callable, Iterable, Mapping, Optional, TypeVar, Union

import numpy as np
import numpy.typing as npt

_Path = Union[str, "os.PathLike[str]"]
T = TypeVar("T")

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

class ControlError(Error):
    """The controller's handshake failed (most likely another key file) or it broke the protocol."""

_Change = Union[tuple[str, str], tuple[str, str, str]]

class Controller:
    """An admin client of a running ``nexthop controller``: push route changes, read counters."""

    def __init__(self, addr: str, key_file: _Path, timeout: float = 30.0) -> None: ...
    def add(self, name: str, action: str) -> dict[str, int]:
        """Add ``name`` with ``action``; UpdateError when present."""
    def delete(self, name: str) -> dict[str, int]:
        """Delete ``name``; UpdateError when absent."""
    def change(self, name: str, action: str) -> dict[str, int]:
        """Change the action of ``name``; UpdateError when absent."""
    def push(self, changes: Union[str, Iterable[_Change]]) -> dict[str, int]:
        """Apply a changes-file text or ``(op, name[, action])`` tuples, all or nothing."""
    def stats(self) -> dict[str, int]:
        """The controller's counters and its FIB's version, generation and size."""
    def close(self) -> None:
        """Close the connection (a later call reconnects)."""
    def __enter__(self) -> "Controller": ...
    def __exit__(self, *exc: object) -> bool: ...
    @property
    def addr(self) -> str: ...

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
    def _native_batch_rate(
        self, addrs: npt.NDArray[np.uint32], rounds: int = 3, batch: int = 4096
    ) -> float:
        """Benchmark hook: the Rust batch rate (lookups/s) of this table on ``addrs``."""
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
    def _native_batch_rate(
        self, keys: npt.NDArray[np.uint64], rounds: int = 3, batch: int = 4096
    ) -> float:
        """Benchmark hook: the Rust batch rate (lookups/s) of this u64 FIB on ``keys``."""
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

def canonical_uri(uri: str) -> str:
    """Parse an NDN URI and print it in canonical form."""

def name_to_wire(uri: str) -> bytes:
    """The Name TLV (type 7) of an NDN URI."""

def name_from_wire(wire: bytes) -> str:
    """The canonical URI of a Name TLV."""

class Interest:
    """An NDN Interest (packet format v0.3)."""

    def __init__(
        self,
        name: str,
        can_be_prefix: bool = False,
        must_be_fresh: bool = False,
        nonce: Optional[int] = None,
        lifetime_ms: Optional[int] = None,
        hop_limit: Optional[int] = None,
        app_parameters: Optional[bytes] = None,
        forwarding_hint: list[str] = ...,
    ) -> None: ...
    @staticmethod
    def decode(wire: bytes) -> "Interest":
        """Decode an Interest TLV; ValueError for malformed input."""
    def encode(self) -> bytes:
        """The Interest TLV."""
    @property
    def name(self) -> str: ...
    @property
    def can_be_prefix(self) -> bool: ...
    @property
    def must_be_fresh(self) -> bool: ...
    @property
    def nonce(self) -> Optional[int]: ...
    @property
    def lifetime_ms(self) -> Optional[int]: ...
    @property
    def hop_limit(self) -> Optional[int]: ...
    @property
    def app_parameters(self) -> Optional[bytes]: ...
    @property
    def forwarding_hint(self) -> list[str]: ...

class Data:
    """An NDN Data packet (packet format v0.3)."""

    def __init__(
        self,
        name: str,
        content: Optional[bytes] = None,
        content_type: Optional[int] = None,
        freshness_period_ms: Optional[int] = None,
        signature_type: int = 0,
        signature_value: bytes = b"",
    ) -> None: ...
    @staticmethod
    def decode(wire: bytes) -> "Data":
        """Decode a Data TLV; ValueError for malformed input."""
    def encode(self) -> bytes:
        """The Data TLV."""
    @property
    def name(self) -> str: ...
    @property
    def content(self) -> Optional[bytes]: ...
    @property
    def content_type(self) -> Optional[int]: ...
    @property
    def freshness_period_ms(self) -> Optional[int]: ...
    @property
    def signature_type(self) -> int: ...
    @property
    def signature_value(self) -> bytes: ...

class LpPacket:
    """An NDNLPv2 LpPacket (Fragment, PitToken, Nack)."""

    def __init__(
        self,
        fragment: Optional[bytes] = None,
        pit_token: Optional[bytes] = None,
        nack_reason: Optional[int] = None,
    ) -> None: ...
    @staticmethod
    def decode(wire: bytes) -> "LpPacket":
        """Decode an LpPacket TLV; ValueError for malformed input."""
    def encode(self) -> bytes:
        """The LpPacket TLV."""
    @property
    def fragment(self) -> Optional[bytes]: ...
    @property
    def pit_token(self) -> Optional[bytes]: ...
    @property
    def is_nack(self) -> bool: ...
    @property
    def nack_reason(self) -> Optional[int]: ...

def forwarder_stats(addr: str = "127.0.0.1:9464", timeout: float = 5.0) -> dict[str, object]:
    """A running forwarder's counters, the object ``nexthop stats --json`` prints."""

# nexthop.sdf: software-defined forwarding apps in Python.

class StateId:
    """A piece of app state that cached decisions register (``Control.new_state_id``)."""
    @property
    def value(self) -> int: ...

class InPkt:
    """The packet being decided; valid only during ``on_packet`` (or until pushed)."""
    @property
    def in_port(self) -> int: ...
    @property
    def data(self) -> bytes: ...
    def __len__(self) -> int: ...
    def mark(self, bit_pos: int, length: int) -> None: ...
    def mark_ingress(self) -> int: ...
    def unmark(self, bit_pos: int, length: int) -> None: ...
    def clear(self) -> None: ...
    def field(self, bit_pos: int, length: int) -> int: ...
    def bytes(self, start: int, length: int) -> bytes: ...
    def new_out_pkt(self) -> OutPkt: ...
    def send(self, out: OutPkt, final: bool = True) -> None: ...

class OutPkt:
    """A packet to send; ``OutPkt(frame)`` is one the app made up (never cached)."""
    def __init__(self, frame: bytes) -> None: ...
    def register(self, state: StateId) -> None: ...
    def add_destination(self, port: int) -> None: ...
    def to_controller(self) -> None: ...
    def clear(self) -> None: ...
    def set_bytes(self, at: int, data: bytes) -> None: ...
    def dec_ttl(self) -> None: ...
    @property
    def destinations(self) -> list[int]: ...
    @property
    def states(self) -> list[StateId]: ...

class Control:
    """The switch's Control calls; valid only during the app call."""
    def new_state_id(self) -> StateId: ...
    def removed(self, state: StateId) -> int: ...
    def get_ports(self) -> list[int]: ...
    def add_port(self) -> int: ...
    def del_port(self, port: int) -> None: ...
    def set_properties(self, port: int, key: str, value: str) -> None: ...
    def get_properties(self, port: int) -> dict[str, str]: ...
    def get_stats(self) -> dict[str, object]: ...
    def now(self) -> float: ...
    def new_in_pkt(self, in_port: int, header: bytes) -> InPkt: ...
    def push(self, pkt: InPkt) -> bool: ...

class ControlFilter:
    """Which missed frames are control traffic (an app's ``control_filter()`` returns one)."""
    def __init__(self, ethertypes: list[int] = [0x0806], dst_macs: list[bytes] = []) -> None: ...
    @staticmethod
    def none() -> ControlFilter: ...
    @property
    def ethertypes(self) -> list[int]: ...
    @property
    def dst_macs(self) -> list[bytes]: ...
    def matches(self, frame: bytes) -> bool: ...

class Switch:
    """The decision cache in front of an app, in the calling thread."""
    def __init__(
        self,
        app: object,
        ports: list[int],
        caching: bool = True,
        capacity: int | None = None,
        max_masks: int | None = None,
    ) -> None: ...
    @staticmethod
    def rust_l2(ports: list[int], caching: bool = True, timeout: float = 300.0) -> Switch: ...
    @property
    def app(self) -> object | None: ...
    def process(self, in_port: int, frame: bytes) -> list[tuple[int | None, bytes]]: ...
    def tick(self, now: float) -> None: ...
    def counters(self) -> dict[str, object]: ...
    def control(self, f: Callable[[Control], T]) -> T: ...

def drop_reasons() -> list[str]: ...
def run_pcap(
    app: object | None,
    in_pcaps: list[tuple[int, _Path]],
    out_dir: _Path,
    ports: list[int] | None = None,
    capacity: int | None = None,
    max_masks: int | None = None,
    slices: list[tuple[str, object | None]] | None = None,
    mac_timeout: float = 300.0,
    max_macs: int = 65536,
    queue: int = 1024,
    control_queue: int = 256,
    control_weight: int = 4,
    pending_table: bool = True,
) -> dict[str, Any]: ...
def run_frames(
    app: object,
    frames: list[tuple[int, bytes]],
    ports: list[int] | None = None,
    capacity: int | None = None,
    max_masks: int | None = None,
    pending_table: bool = True,
    in_flight: int = 256,
) -> dict[str, Any]: ...
def run_live(
    app: object | None,
    ports: list[tuple[int, str]],
    inputs: list[int] | None = None,
    workers: int = 1,
    io: str = "afpacket",
    fanout: str = "hash",
    xdp_mode: str = "auto",
    xdp_queue: int = 0,
    duration: float | None = None,
    quiet: bool = False,
    capacity: int | None = None,
    max_masks: int | None = None,
    label: str | None = None,
    metrics: str | None = None,
    metrics_allow_remote: bool = False,
    slices: list[tuple[str, object | None]] | None = None,
    mac_timeout: float = 300.0,
    max_macs: int = 65536,
    queue: int = 1024,
    control_queue: int = 256,
    control_weight: int = 4,
    pending_table: bool = True,
) -> dict[str, Any]: ...
def run_ovs(
    app: object,
    ports: list[int],
    listen: str = "127.0.0.1:6653",
    bridge: str | None = None,
    idle_timeout: int = 10,
    tunnels: list[tuple[str, str]] = ...,
    duration: float | None = None,
    label: str | None = None,
) -> dict[str, Any]: ...
