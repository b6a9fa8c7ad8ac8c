"""NCCL's reading of ``NCCL_SOCKET_IFNAME`` over a node's interfaces (issue 19).

NCCL environment variables (docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html,
``NCCL_SOCKET_IFNAME``): a comma-separated list of interface-name *prefixes*
(``eth`` matches ``eth0`` and ``eth1``); a leading ``^`` makes the whole list an
exclusion list (``^docker`` uses every interface but ``docker*``); a leading ``=``
(after any ``^``) matches names exactly (``=eth0`` is ``eth0`` only). Unset, NCCL
avoids ``lo`` and ``docker*`` unless nothing else exists. A user list replaces that
default: since NCCL 2.3.5, ``^docker0`` no longer keeps ``lo`` out, so on a node whose
other interfaces do not match, NCCL may pick loopback and the ranks never meet.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudiag.network import NetInterface


@dataclass(frozen=True)
class IfnameSpec:
    """A parsed ``NCCL_SOCKET_IFNAME``."""

    text: str
    exclude: bool
    exact: bool
    names: tuple[str, ...]

    def matches(self, name: str) -> bool:
        """Whether NCCL may use the interface ``name`` under this value."""
        hit = any((name == n) if self.exact else name.startswith(n) for n in self.names)
        return not hit if self.exclude else hit


def parse_ifname(text: str) -> IfnameSpec:
    """``^=eth0,eth1`` → exclude, exact, (eth0, eth1)."""
    rest = text.strip()
    exclude = rest.startswith("^")
    if exclude:
        rest = rest[1:]
    exact = rest.startswith("=")
    if exact:
        rest = rest[1:]
    names = tuple(n.strip() for n in rest.split(",") if n.strip())
    return IfnameSpec(text=text, exclude=exclude, exact=exact, names=names)


def usable(interfaces: tuple[NetInterface, ...], spec: IfnameSpec | None) -> list[NetInterface]:
    """The interfaces NCCL's socket transport may use: matching ``spec`` (or, unset, not
    ``lo``/``docker*``), and carrying an IPv4 address where that is recorded."""

    def ok(i: NetInterface) -> bool:
        if i.ipv4 is not None and not i.ipv4:
            return False
        if spec is None:
            return not (i.loopback or i.name == "lo" or i.name.startswith("docker"))
        return spec.matches(i.name)

    return [i for i in interfaces if ok(i)]


def is_loopback(iface: NetInterface) -> bool:
    """Loopback by flag, by name, or by its address (127.0.0.0/8)."""
    return bool(
        iface.loopback or iface.name == "lo" or any(a.startswith("127.") for a in iface.ipv4 or ())
    )


def loopback_address(address: str) -> bool:
    """127.0.0.0/8 (Debian's 127.0.1.1 for the host name included) or ``::1``."""
    return address.startswith("127.") or address == "::1"
