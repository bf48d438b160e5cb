"""This node under any of its names and addresses: `--nodes` typed with this machine's own IP
address must not ask it again over ssh (its ranks were counted twice, and a false "2 never
started" followed)."""

from __future__ import annotations

import socket

from hangscope.collect.procfs import read_local_addresses
from hangscope.remote.multinode import _is_here


def test_this_machines_addresses_are_read_from_the_kernel() -> None:
    found = read_local_addresses()
    assert "127.0.0.1" in found and "::1" in found, found
    # every address the kernel lists is a real address of this machine: it can be bound
    for address in found:
        if ":" in address and address.startswith("fe80"):
            continue  # link-local needs a scope id to bind
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((address, 0))


def test_a_node_named_by_this_machines_address_or_name_is_here() -> None:
    assert _is_here("localhost") and _is_here(socket.gethostname())
    for address in read_local_addresses():
        assert _is_here(address), address
    assert not _is_here("192.0.2.254") or "192.0.2.254" in read_local_addresses()
    assert not _is_here("node-that-is-not-here")
