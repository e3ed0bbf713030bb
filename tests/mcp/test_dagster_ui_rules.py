"""The Dagster UI guard's rules on their own: which Host and Origin are its own, where a
login may send the browser, sessions, and who counts as an admin (stash_serve.dagster_ui)."""

from __future__ import annotations

from stash_pipeline.auth import TokenInfo
from stash_serve.dagster_ui import Hosts, Sessions, _safe_next, admin_on_root, cookie_name, same_origin


def test_hosts_are_loopback_the_bound_address_and_the_allowed_names() -> None:
    hosts = Hosts("127.0.0.1")
    for ok in ("127.0.0.1:3000", "localhost:3000", "LOCALHOST", "[::1]:3000", "127.0.0.2:80", "127.0.0.1"):
        assert hosts.allowed(ok), ok
    for bad in ("rebind.evil.example", "rebind.evil.example:3000", "localhost.evil.example:3000", "", None,
                "127.0.0.1:3000@evil.example", "evil.example/127.0.0.1", "127.0.0.1:notaport", "10.0.0.5:3000"):
        assert not hosts.allowed(bad), bad
    assert Hosts("0.0.0.0").names == frozenset()  # a wildcard bind adds no name
    assert Hosts("10.0.0.5").allowed("10.0.0.5:3000")
    assert Hosts("::", ["dagster.example.com"]).allowed("Dagster.Example.com")
    assert Hosts("fd00::5").allowed("[fd00::5]:3000")


def test_an_origin_is_own_only_with_the_same_name_and_port() -> None:
    assert same_origin("http://127.0.0.1:3000", "127.0.0.1:3000")
    assert same_origin("https://dagster.example.com", "dagster.example.com")  # behind a TLS proxy
    assert same_origin("http://dagster.example.com:80", "dagster.example.com")
    for origin, host in [
        ("http://127.0.0.1:8888", "127.0.0.1:3000"),  # another port of the same host
        ("http://localhost:3000", "127.0.0.1:3000"),  # another name: another origin
        ("http://evil.example", "127.0.0.1:3000"),
        ("null", "127.0.0.1:3000"),
        ("file://", "127.0.0.1:3000"),
        ("http://127.0.0.1:3000/path", "127.0.0.1:3000"),
        ("http://127.0.0.1:3000", None),
        ("https://dagster.example.com:8443", "dagster.example.com"),
    ]:
        assert not same_origin(origin, host), (origin, host)


def test_login_returns_only_to_a_path_of_this_site() -> None:
    assert _safe_next("/runs?x=1") == "/runs?x=1"
    for bad in (None, "", "https://evil.example/", "//evil.example/", "/\\evil.example", "runs", "/a\nb"):
        assert _safe_next(bad) == "/", bad


def test_sessions_end_and_are_per_port() -> None:
    sessions = Sessions(ttl_s=60)
    session_id = sessions.open("stash_secret")
    assert sessions.secret(session_id) == "stash_secret"
    assert sessions.secret("forged") is None
    sessions.close(session_id)
    assert sessions.secret(session_id) is None
    expired = Sessions(ttl_s=0)
    assert expired.secret(expired.open("stash_secret")) is None
    assert cookie_name("127.0.0.1:3000") != cookie_name("127.0.0.1:3001")


def test_the_ui_wants_the_admin_right_on_the_whole_tree() -> None:
    def token(namespaces: tuple[str, ...], rights: set[str]) -> TokenInfo:
        return TokenInfo(id=1, name="t", namespaces=namespaces, rights=frozenset(rights))

    assert admin_on_root(token(("/",), {"admin"}))
    assert admin_on_root(token(("/projects/x", "/"), {"read", "write", "admin"}))
    assert not admin_on_root(token(("/",), {"read", "write"}))
    assert not admin_on_root(token(("/projects/x",), {"admin"}))
