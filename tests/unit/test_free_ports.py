"""Restartable servers get ports below the ephemeral range, skipping ports something already listens on."""

import socket

import pytest

from deploy.local_stack import StackError, free_ports


def _listener() -> tuple[socket.socket, int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock, sock.getsockname()[1]


def test_a_port_in_use_is_skipped_with_its_whole_block():
    sock, busy = _listener()
    with sock:
        assert free_ports(busy, busy + 10, width=2) == busy + 2
        assert free_ports(busy - 1, busy + 9, width=2) == busy + 1


def test_no_free_block_is_a_clear_error():
    sock, busy = _listener()
    with sock, pytest.raises(StackError, match=f"no 1 free consecutive port.*between {busy} and {busy + 1}"):
        free_ports(busy, busy + 1)
