"""Test-wide setup: offline, key-free environment and a guard against non-loopback connections.

The environment is set at import, before nbval starts any kernel, so notebooks executed by
`pytest --nbval` run exactly as .ci/execute_notebooks.py ran them when their outputs were saved.
"""
import ipaddress
import os
import socket

from offline_env import offline_environ

_env = offline_environ()
os.environ.clear()
os.environ.update(_env)

_LOOPBACK_NAMES = {"localhost", "ip6-localhost"}


class NetworkBlocked(RuntimeError):
    """A test tried to reach a machine other than this one."""


def _is_loopback(host):
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode()
    if host in _LOOPBACK_NAMES or host == "":
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _address_host(address):
    return address[0] if isinstance(address, tuple) else None   # AF_UNIX paths are local


_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_real_getaddrinfo = socket.getaddrinfo


def _guarded_connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(_address_host(address)):
        raise NetworkBlocked(f"tests may only connect to 127.0.0.1; this one tried {address!r}")
    return _real_connect(self, address)


def _guarded_connect_ex(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(_address_host(address)):
        raise NetworkBlocked(f"tests may only connect to 127.0.0.1; this one tried {address!r}")
    return _real_connect_ex(self, address)


def _guarded_getaddrinfo(host, *args, **kwargs):
    if not _is_loopback(host):
        raise NetworkBlocked(f"tests may only resolve loopback names; this one asked for {host!r}")
    return _real_getaddrinfo(host, *args, **kwargs)


socket.socket.connect = _guarded_connect
socket.socket.connect_ex = _guarded_connect_ex
socket.getaddrinfo = _guarded_getaddrinfo
