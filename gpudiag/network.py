"""The model of a node's identity and network (schema 1.3, ``node``; grown in 1.4).

What NCCL and torch's rendezvous need from a node, recorded so that the nodes of
one allocation can be compared (``gpudiag fleet``, issue 19): the interfaces NCCL
may pick (NCCL's ``NCCL_SOCKET_IFNAME``), the InfiniBand/RoCE ports its IB
transport uses, the boot id that tells two machines with one hostname apart, how
``MASTER_ADDR`` resolves here, and the NCCL version torch would load; since 1.4 the
routes, each RoCE port's GID table, which ``libnccl``/NCCL network plugin the
dynamic loader would find, and the RDMA driver stack (MLNX_OFED/DOCA-OFED or the
distribution's inbox driver, the HCAs' firmware, the HPC-X the job would use).
``None`` always means "could not collect". Part of the model, which re-exports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class NetInterface:
    """One network interface of ``/sys/class/net``.

    Attributes:
        name: the interface name (``eth0``, ``ib0``, ``lo``).
        operstate: ``/sys/class/net/<name>/operstate`` (``up``, ``down``, ``unknown``…).
        loopback: the ``IFF_LOOPBACK`` flag of ``/sys/class/net/<name>/flags``.
        ipv4: the interface's IPv4 address with its prefix length (``10.0.0.5/24``), as
            ``SIOCGIFADDR``/``SIOCGIFNETMASK`` report it; ``()`` none; None unread.
    """

    name: str
    operstate: str | None = None
    loopback: bool | None = None
    ipv4: tuple[str, ...] | None = None


@dataclass(frozen=True)
class IbGid:
    """One used entry of an RDMA port's GID table (since 1.4).

    Attributes:
        index: the entry's index (``ports/<n>/gids/<index>``), what ``NCCL_IB_GID_INDEX``
            names.
        gid: the GID as the kernel prints it (``0000:0000:0000:0000:0000:ffff:0a00:0005``).
        type: ``ports/<n>/gid_attrs/types/<index>``: ``RoCE v2``, ``IB/RoCE v1``; None
            when unreadable.
    """

    index: int
    gid: str
    type: str | None = None


@dataclass(frozen=True)
class IbPort:
    """One port of an RDMA device of ``/sys/class/infiniband`` (InfiniBand or RoCE).

    Attributes:
        device: the device (``mlx5_0``).
        port: the port number (1-based, as the kernel numbers them).
        state: ``ACTIVE``, ``DOWN``, ``INIT``… (``/ports/<n>/state`` without its number).
        link_layer: ``InfiniBand``, or ``Ethernet`` for RoCE (``/ports/<n>/link_layer``).
        gids: since 1.4, the used (non-zero) entries of the port's GID table; None when
            not read.
    """

    device: str
    port: int
    state: str | None = None
    link_layer: str | None = None
    gids: tuple[IbGid, ...] | None = None


@dataclass(frozen=True)
class Route:
    """One IPv4 route of ``/proc/net/route`` that is up (since 1.4).

    Attributes:
        interface: the interface the route sends through.
        destination: the network with its prefix length (``10.0.0.0/24``; the default
            route is ``0.0.0.0/0``).
        gateway: the next hop, or None for a directly connected network.
        metric: the route's metric (lower wins among routes to one destination).
    """

    interface: str
    destination: str
    gateway: str | None = None
    metric: int = 0


@dataclass(frozen=True)
class LibraryFile:
    """A shared library the dynamic loader would find (since 1.4).

    Attributes:
        name: the name asked for (``libnccl.so.2``, ``libnccl-net.so``).
        path: the file found.
        via: where the search found it: ``torch wheel``, ``LD_LIBRARY_PATH``,
            ``ld.so.cache``, ``default path``, or ``NCCL_NET_PLUGIN path``.
    """

    name: str
    path: str
    via: str


@dataclass(frozen=True)
class RdmaDevice:
    """One RDMA device of ``/sys/class/infiniband`` (an HCA; since 1.4).

    Attributes:
        device: the device (``mlx5_0``).
        fw_ver: its firmware version (``<device>/fw_ver``: ``28.39.1002``).
        hca_type: the HCA type (``<device>/hca_type``: ``MT4129`` for a ConnectX-7).
        board_id: the board's PSID (``<device>/board_id``: ``MT_0000000838``).
    """

    device: str
    fw_ver: str | None = None
    hca_type: str | None = None
    board_id: str | None = None


@dataclass(frozen=True)
class HpcxInfo:
    """The NVIDIA HPC-X a job here would use (since 1.4).

    Attributes:
        path: its folder, symbolic links resolved (``/opt/hpcx-v2.18-gcc-mlnx_ofed-…``).
        via: what named it: ``HPCX_DIR``, ``HPCX_HOME``, ``OPAL_PREFIX`` (its
            ``ompi`` folder) or ``/opt/hpcx`` (NGC containers' place).
        version: ``2.21.3``, from ``VERSION``'s first line (``HPC-X v2.21.3``), else the
            folder's name (``hpcx-v2.18-…``), else ``HPCX_VERSION``.
        ofed: the RDMA stack it was built for: ``VERSION``'s ``OFED:`` line, else the
            folder name's part (``MLNX_OFED_LINUX-5.8-1.0.1.1``, ``MLNX_OFED_LINUX-5``,
            ``mlnx_ofed``, ``doca_ofed``, ``inbox``).
    """

    path: str
    via: str
    version: str | None = None
    ofed: str | None = None


@dataclass(frozen=True)
class RdmaStack:
    """The InfiniBand/RoCE driver stack of a node (snapshot ``node.rdma``, since 1.4).

    Attributes:
        kernel_release: ``/proc/sys/kernel/osrelease`` (``uname -r``).
        mlx5_core_loaded: ``/sys/module/mlx5_core`` exists (the ConnectX driver is loaded).
        mlx5_core_version: ``/sys/module/mlx5_core/version``: MLNX_OFED's and DOCA-OFED's
            module has one (``23.10-1.1.9``); the kernel's own (inbox) module has none in
            current kernels, or the kernel's release on some distributions.
        mlx5_core_srcversion: ``/sys/module/mlx5_core/srcversion``, the checksum of the
            module's source (one build of the driver).
        ofed: what ``ofed_info -s`` prints, without its colon
            (``MLNX_OFED_LINUX-23.10-1.1.9.0``, ``OFED-internal-24.10-1.1.4.0`` for
            DOCA-OFED), read from the script itself; None when there is none (the
            distribution's rdma-core) or it is unreadable.
        libibverbs: the file ``libibverbs.so.1`` resolves to along the loader's search
            (``libibverbs.so.1.14.50.0``: rdma-core names it ``.1.<ABI>.<its version>``).
        devices: the RDMA devices with their firmware, by name.
        hpcx: the HPC-X found, or None.
    """

    kernel_release: str | None = None
    mlx5_core_loaded: bool | None = None
    mlx5_core_version: str | None = None
    mlx5_core_srcversion: str | None = None
    ofed: str | None = None
    libibverbs: str | None = None
    devices: tuple[RdmaDevice, ...] | None = None
    hpcx: HpcxInfo | None = None


@dataclass(frozen=True)
class NodeInfo:
    """Who this node is and how it reaches the others (snapshot ``node``, since 1.3).

    Attributes:
        boot_id: ``/proc/sys/kernel/random/boot_id``: new at every boot, so two
            snapshots with one boot id come from one running machine.
        os_name: ``PRETTY_NAME`` of ``/etc/os-release`` (the container image's, in one).
        interfaces: ``/sys/class/net``'s interfaces, sorted by name.
        ib_ports: ``/sys/class/infiniband``'s ports; ``()`` when the class is empty or
            absent (no RDMA driver loaded).
        nccl_env: the NCCL, Gloo and rendezvous variables that are set (``NCCL_*``,
            ``GLOO_SOCKET_IFNAME``, ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE``…).
        master_addr_ips: the IPv4/IPv6 addresses ``MASTER_ADDR`` resolves to here
            (``getaddrinfo``); None when unset or unresolved (``master_addr_error``).
        master_addr_error: why ``MASTER_ADDR`` did not resolve.
        nccl_version: the NCCL version torch would load, from the installed
            ``nvidia-nccl-cu*`` wheel or torch's pinned requirement on it.
        nccl_source: where ``nccl_version`` was read.
        routes: since 1.4, the IPv4 routes that are up, in the kernel's order.
        nccl_libs: since 1.4, every ``libnccl.so.2`` the loader's search finds, in its
            order: the first is the one torch would load.
        nccl_net_plugins: since 1.4, the NCCL network plugin files NCCL's ``dlopen``
            would find (``libnccl-net.so``, or what ``NCCL_NET_PLUGIN`` names), in the
            loader's order; ``()`` none (NCCL uses its internal IB/socket transports).
        rdma: since 1.4, the RDMA driver stack: MLNX_OFED/DOCA-OFED or inbox, the HCAs'
            firmware, the HPC-X found; None when not collected.
    """

    boot_id: str | None = None
    os_name: str | None = None
    interfaces: tuple[NetInterface, ...] | None = None
    ib_ports: tuple[IbPort, ...] | None = None
    nccl_env: Mapping[str, str] = field(default_factory=dict, hash=False)
    master_addr_ips: tuple[str, ...] | None = None
    master_addr_error: str | None = None
    nccl_version: str | None = None
    nccl_source: str | None = None
    routes: tuple[Route, ...] | None = None
    nccl_libs: tuple[LibraryFile, ...] | None = None
    nccl_net_plugins: tuple[LibraryFile, ...] | None = None
    rdma: RdmaStack | None = None

    @property
    def master_addr(self) -> str | None:
        """The recorded ``MASTER_ADDR`` (None when unset)."""
        return self.nccl_env.get("MASTER_ADDR")
