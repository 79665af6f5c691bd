"""The guard in conftest.py: tests may reach 127.0.0.1 and nothing else."""

import socket

import pytest

from offline_env import NetworkBlocked


@pytest.mark.parametrize(
    "address", [("93.184.216.34", 443), ("8.8.8.8", 53), ("2606:4700::1111", 443, 0, 0)]
)
def test_non_loopback_connections_are_refused(address):
    family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
    with socket.socket(family) as s, pytest.raises(NetworkBlocked):
        s.connect(address)


def test_non_loopback_names_are_not_resolved():
    with pytest.raises(NetworkBlocked):
        socket.getaddrinfo("api.openai.com", 443)


def test_loopback_is_allowed():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        with socket.create_connection(server.getsockname(), timeout=2):
            pass


def test_the_openai_sdk_cannot_reach_the_internet():
    import openai

    client = openai.OpenAI(api_key="sk-test-000000000000000000", max_retries=0, timeout=2)
    with pytest.raises(openai.APIConnectionError):
        client.models.list()
