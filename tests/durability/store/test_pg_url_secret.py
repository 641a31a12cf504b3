"""A PostgreSQL URL's password never reaches a message: not through the URL
shown (``postgres.redact``, ``database.describe``) and not through what
libpq says about a URL it cannot read (it quotes the part it stumbled on)."""

from __future__ import annotations

import pytest

from durability.store import StoreUnavailable
from durability.store.database import describe
from durability.store.postgres import connect, redact

SECRET = "Zq7s3cretPW"

# Port 1 of localhost refuses at once: no server is needed.
URLS = [
    f"postgresql://alice:{SECRET}@127.0.0.1:1/db",
    f"postgresql://alice:{SECRET}%zz@127.0.0.1:1/db",      # libpq quotes the bad token
    f"postgresql://alice:{SECRET}/x@127.0.0.1:1/db",       # a slash in the password
    f"postgresql://alice:p@{SECRET}@127.0.0.1:1/db",       # an at sign in the password
    f"postgresql://alice@127.0.0.1:1/db?password={SECRET}",
    f"postgresql://alice@127.0.0.1:1/db?sslmode=disable&password={SECRET}",
    f"postgresql://alice:{SECRET}@[::1/db",                  # libpq quotes the whole URL
    f"postgres://alice:{SECRET}@127.0.0.1:notaport/db",
]


@pytest.mark.parametrize("url", URLS)
def test_the_url_shown_has_no_password(url: str) -> None:
    shown = redact(url)
    assert SECRET not in shown
    assert "alice" in shown and "***" in shown
    assert describe(url) == shown


@pytest.mark.parametrize("url", URLS)
def test_a_failed_connection_says_why_without_the_password(url: str) -> None:
    with pytest.raises(StoreUnavailable) as err:
        connect(url, busy_timeout_ms=100)
    message = str(err.value)
    assert message.startswith("cannot connect to postgres")
    assert SECRET not in message
    assert len(message.splitlines()) == 1


def test_a_url_without_a_password_is_shown_as_it_is() -> None:
    url = "postgresql://alice@db.example:5432/state?sslmode=require"
    assert redact(url) == url
