"""`sp-scan serve` against hostile clients: every abuse case of issue 19 is a test here.

Clients are raw sockets on 127.0.0.1; other client addresses are 127.0.0.2 and 127.0.0.3 (the whole
of 127.0.0.0/8 reaches the loopback; only 127.0.0.1 and ::1 are exempt from the per-address limits by
default), so "one address flooding while another is served" is real. Each test waits for an event (a
counter, a closed socket), never for a wall-clock window; rates that must not refill during a test are
a token per 100 s.
"""

from __future__ import annotations

import json
import resource
import socket
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from pathlib import Path

import grpc
import pytest
from google.protobuf import empty_pb2

import kernelchain
from electrum_support import RawClient
from index_support import wait_until
from serving import ServerThread, ok
from sp_scan.server.limits import Gate, Limits, RateLimitedLog, connection_cap, ip_group
from sp_scan.proto import blindbit_oracle_pb2 as pb

ROOT = Path(__file__).resolve().parent.parent
TIP = kernelchain.SAMPLE_TIP
OTHER = "127.0.0.2"
THIRD = "127.0.0.3"
MAINNET_HEIGHT = 930_000


def connect(url: str, source: str = "127.0.0.1", rcvbuf: int | None = None) -> socket.socket:
    parts = urllib.parse.urlsplit(url)
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.bind((source, 0))
    sock.settimeout(30)
    sock.connect((parts.hostname, parts.port))
    return sock


def read_answer(sock: socket.socket, head: bool = False) -> tuple[int, dict[str, str], bytes]:
    """The next HTTP answer on the socket: (status, headers with lower-case names, body); reads no further.

    With `head`, the answer to a HEAD request: no body follows its headers.

    Raises:
        ConnectionError: the server closed the connection before a whole answer.
    """
    with sock.makefile("rb", buffering=0) as reader:
        status_line = reader.readline()
        if not status_line:
            raise ConnectionError("closed before an answer")
        headers = {}
        while (line := reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.lower()] = value.strip()
        body = b""
        while not head and len(body) < int(headers.get("content-length", 0)):
            chunk = reader.read(int(headers["content-length"]) - len(body))
            if not chunk:
                raise ConnectionError("closed inside an answer")
            body += chunk
    return int(status_line.split()[1]), headers, body


def exchange(url: str, raw: bytes, source: str = "127.0.0.1") -> tuple[int, dict[str, str], bytes]:
    with connect(url, source) as sock:
        sock.sendall(raw)
        return read_answer(sock)  # a refusal lingers: the server reads what is sent, then answers


def closed_by_server(sock: socket.socket) -> bool:
    """True once the server has closed the connection (reads EOF or a reset)."""
    try:
        while True:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, TimeoutError):
        return True


def rest_of(sock: socket.socket) -> bytes:
    """What the server still sends until it closes the connection."""
    rest = b""
    while chunk := sock.recv(65536):
        rest += chunk
    return rest


def get_from(url: str, path: str, source: str) -> int:
    return exchange(url, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode(), source)[0]


@pytest.fixture(scope="module")
def mainnet_index(tmp_path_factory) -> Path:
    """An index of vectors/blocks/mainnet.bin: a block whose /utxos answer is ~640 kB."""
    db = tmp_path_factory.mktemp("mainnet") / "main.db"
    cmd = [sys.executable, "-m", "sp_scan.cli", "index", "sync", "--db", str(db), "--network", "main", str(ROOT / "vectors/blocks/mainnet.bin")]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    return db


# ---- the limit logic on its own ----
def test_ipv6_addresses_are_grouped_by_their_64_and_ipv4_mapped_ones_are_ipv4():
    assert ip_group("2001:db8:1:2:aaaa::1") == ip_group("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert ip_group("2001:db8:1:3::1") != ip_group("2001:db8:1:2::1")
    assert ip_group("::ffff:192.0.2.7") == ip_group("192.0.2.7") == "192.0.2.7"
    assert ip_group("fe80::1%eth0") == "fe80::/64"


def test_the_gate_counts_connections_per_group_and_in_total_and_refills_buckets():
    now = [0.0]
    gate = Gate(Limits(max_connections=3, per_ip_connections=2, per_ip_rate=10, per_ip_burst=2), ("http", "grpc"), fd_limit=10_000, clock=lambda: now[0])
    a = gate.admit("http", "2001:db8::1")
    b = gate.admit("grpc", "2001:db8::2")  # the same /64
    assert a and b and gate.admit("http", "2001:db8::3") is None and gate.stats.refused_per_ip == 1
    c = gate.admit("http", "192.0.2.1")
    assert gate.admit("http", "192.0.2.2") is None and gate.stats.refused_total == 1
    assert [gate.allow_request(c) for _ in range(3)] == [True, True, False]
    now[0] += 0.1  # one token back at 10/s
    assert [gate.allow_request(c) for _ in range(2)] == [True, False]
    gate.release(a)
    gate.release(a)  # twice is once
    assert gate.stats.open == {"http": 1, "grpc": 1} and gate.admit("http", "2001:db8::4") is not None


def test_exempt_networks_skip_the_per_address_caps_and_rate_but_count_in_the_total():
    now = [0.0]
    limits = Limits(max_connections=5, per_ip_connections=1, per_ip_rate=10, per_ip_burst=2)
    gate = Gate(limits, ("http", "electrum"), fd_limit=10_000, clock=lambda: now[0])
    loopback = [gate.admit("http", "127.0.0.1"), gate.admit("electrum", "::1"), gate.admit("http", "::ffff:127.0.0.1")]
    assert all(ticket and ticket.exempt for ticket in loopback)  # the default: 127.0.0.1 and ::1, as Frigate
    assert all(gate.allow_request(loopback[0]) for _ in range(10))
    other = gate.admit("electrum", "127.0.0.2")  # the rest of 127/8 is not exempt
    assert other and not other.exempt and gate.admit("http", "127.0.0.2") is None and gate.stats.refused_per_ip == 1
    assert gate.allow_request(other, cost=25) and not gate.allow_request(other)  # a cost over the burst takes the whole bucket
    assert gate.admit("http", "192.0.2.1") and gate.admit("http", "127.0.0.1") is None and gate.stats.refused_total == 1
    none = Gate(Limits(per_ip_connections=1, per_ip_exempt=()), fd_limit=10_000)
    assert none.admit("http", "127.0.0.1") and none.admit("http", "127.0.0.1") is None
    with pytest.raises(ValueError, match="'localhost' is not an IPv4 or IPv6 network"):
        Gate(Limits(per_ip_exempt=("localhost",)), fd_limit=10_000)


def test_the_connection_cap_stays_below_the_file_descriptor_limit():
    assert connection_cap(4096, 1024) == 1024 - 128
    assert connection_cap(100, 1024) == 100
    assert connection_cap(0, 1_048_576) == 1_048_576 - 128


def test_repeated_log_lines_are_held_back_and_counted():
    now = [0.0]
    log = RateLimitedLog(every=10, clock=lambda: now[0])
    assert log("parse", "bad request") == "bad request"
    assert [log("parse", "bad request") for _ in range(1999)] == [None] * 1999
    assert log("other", "x") == "x"
    now[0] = 11
    assert log("parse", "bad request") == "bad request (and 1999 more like it in 11 s)"


# ---- HTTP ----
@pytest.fixture
def limited(kernel_index):
    lines: list[str] = []
    limits = Limits(per_ip_connections=20, per_ip_rate=50, per_ip_burst=50, header_timeout=0.5, idle_timeout=600, write_timeout=0.5)
    with ServerThread(kernel_index, limits=limits, log=lines.append) as server:
        yield server, lines


def test_a_flood_from_one_address_is_limited_while_another_is_served(limited):
    server, _ = limited
    with connect(server.url, OTHER) as flood:
        flood.sendall(b"GET /block-height HTTP/1.1\r\nHost: x\r\n\r\n" * 200)  # pipelined: 4 times the burst
        statuses = [read_answer(flood)[0] for _ in range(200)]
    assert statuses[:50] == [200] * 50 and statuses.count(429) >= 100
    assert get_from(server.url, "/block-height", "127.0.0.1") == 200  # the other address still has its tokens
    assert server.server.gate.stats.rate_limited >= 100


def test_idle_connections_from_one_address_are_capped_and_closed_while_another_is_served(limited):
    server, _ = limited
    idle = [connect(server.url, OTHER) for _ in range(20)]
    wait_until(lambda: server.server.gate.stats.open["http"] == 20)
    with connect(server.url, OTHER) as refused:
        status, headers, body = read_answer(refused)
        assert (status, json.loads(body)) == (429, {"error": "too many connections from your address"})
        assert closed_by_server(refused)
    assert get_from(server.url, "/block-height", "127.0.0.1") == 200
    for s in idle:
        s.close()
    wait_until(lambda: server.server.gate.stats.open["http"] == 0)


def test_idle_connections_are_closed_after_the_idle_timeout(kernel_index):
    with ServerThread(kernel_index, limits=Limits(idle_timeout=0.3), log=lambda line: None) as server:
        idle = [connect(server.url, OTHER) for _ in range(10)]
        with connect(server.url) as used:
            used.sendall(b"GET /block-height HTTP/1.1\r\n\r\n")
            assert read_answer(used)[0] == 200
            assert closed_by_server(used)  # idle after its answer
        assert all(closed_by_server(s) for s in idle)
        assert server.server.http.timeouts["idle"] == 11
        wait_until(lambda: server.server.gate.stats.open["http"] == 0)
        for s in idle:
            s.close()


def test_a_client_that_sends_its_request_slowly_is_answered_408_and_closed(limited):
    server, _ = limited
    with connect(server.url) as slow:
        slow.sendall(b"GET /block-height HTTP/1.1\r\nHost: x\r\n")  # the head never ends
        status, _, body = read_answer(slow)
        assert status == 408 and "no complete request" in json.loads(body)["error"]
        assert closed_by_server(slow)
    assert server.server.http.timeouts["header"] == 1


@pytest.mark.parametrize(
    ("raw", "status", "message"),
    [
        (b"GET /utxos/\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n", 400, "not visible ASCII"),
        (b"GET /utxos/%ff%fe HTTP/1.1\r\nHost: x\r\n\r\n", 400, "not UTF-8"),
        (b"GET /" + b"a" * 1_000_000 + b" HTTP/1.1\r\n\r\n", 431, "request head is over"),
        (b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 1_000_000 + b"\r\n\r\n", 431, "request head is over"),
        (b"POST /forward-tx HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n", 400, "Content-Length and Transfer-Encoding"),
        (b"POST /forward-tx HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501, "Transfer-Encoding is not supported"),
        (b"POST /forward-tx HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcd", 400, "repeated Content-Length"),
        (b"GET /info HTTP/9.9\r\n\r\n", 505, "only HTTP/1.0 and HTTP/1.1"),
        (b"GET /info\r\n\r\n", 400, "METHOD TARGET VERSION"),
        (b"GET /info HTTP/1.1\r\nBad Name: x\r\n\r\n", 400, "header line does not parse"),
        (b"GET /info HTTP/1.1\r\nX: a\r\n folded\r\n\r\n", 400, "header line does not parse"),
        (b"GET /info HTTP/1.1\r\nX: a\x00b\r\n\r\n", 400, "control characters"),
        (b"GET /info HTTP/1.1\r\nX: a\nY: b\r\n\r\n", 400, "bare CR or LF"),
        (b"GET /info HTTP/1.1\r\n" + b"X: y\r\n" * 100 + b"\r\n", 431, "more than 64 header fields"),
        # what llhttp refuses that the hand-written parser let through, and the smuggling variants
        (b"POST /forward-tx HTTP/1.1\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\nabcd", 400, "repeated Content-Length"),
        (b"POST /forward-tx HTTP/1.1\r\nContent-Length: 4, 4\r\n\r\nabcd", 400, "bad or repeated Content-Length"),
        (b"POST /forward-tx HTTP/1.1\r\nContent-Length: +4\r\n\r\nabcd", 400, "bad or repeated Content-Length"),
        (b"POST /forward-tx HTTP/1.1\r\nContent-Length: 184467440737095516160\r\n\r\n", 400, "bad or repeated Content-Length"),
        (b"POST /forward-tx HTTP/1.1\r\nTransfer-Encoding: identity\r\nContent-Length: 4\r\n\r\nabcd", 400, "Content-Length and Transfer-Encoding"),
        (b"POST /forward-tx HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: xchunked\r\n\r\nabcd", 400, "Content-Length and Transfer-Encoding"),
        (b"POST /forward-tx HTTP/1.1\r\nTransfer-Encoding : chunked\r\nContent-Length: 4\r\n\r\nabcd", 400, "header line does not parse"),
        (b"POST /forward-tx HTTP/1.1\r\nTransfer-Encoding:\x0bchunked\r\nContent-Length: 4\r\n\r\nabcd", 400, "control characters"),
        (b"POST /forward-tx HTTP/1.1\r\nX: a\nContent-Length: 4\r\n\r\nabcd", 400, "bare CR or LF"),
        (b"POST /forward-tx HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabcd\r\n0\r\n\r\n", 501, "Transfer-Encoding is not supported"),
        (b"GET /info HTTP/1.1\r\n X: a\r\n\r\n", 400, "header line does not parse"),
        (b"GET /info HTTP/1.1\r\nX: a\r\n\tb\r\n\r\n", 400, "header line does not parse"),
        (b"GET /info HTTP/1.1\r\nX\x00Y: a\r\n\r\n", 400, "header line does not parse"),
        (b"GET /in\x00fo HTTP/1.1\r\n\r\n", 400, "not visible ASCII"),
        (b"GET /info HTTP/1.1\r\nX: a\x7fb\r\n\r\n", 400, "control characters"),
        (b"GET /info HTTP/1.1\r\nX: a\rY: b\r\n\r\n", 400, "bare CR or LF"),
        (b"FOO /info HTTP/1.1\r\n\r\n", 501, "method is not implemented"),
        (b"get /info HTTP/1.1\r\n\r\n", 501, "method is not implemented"),
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505, "only HTTP/1.0 and HTTP/1.1"),
        (b"GET /info HTTP/2.0\r\n\r\n", 505, "only HTTP/1.0 and HTTP/1.1"),
        (b"GET /info HTTP/1.1 \r\n\r\n", 400, "METHOD TARGET VERSION"),
        (b"CONNECT example.com:443 HTTP/1.1\r\n\r\n", 400, "not a path"),
        (b"POST /forward-tx HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nContent-Length: 4\r\n\r\nabcd", 400, "Upgrade request with a body"),
        (b"POST /forward-tx HTTP/1.1\r\nContent-Length: 400001\r\n\r\n", 400, "body is over 400000 bytes"),
    ],
    ids=[
        "raw-non-utf8", "encoded-non-utf8", "1MB-url", "1MB-header", "cl-and-te", "te", "two-cl", "http9", "no-version", "bad-name", "folded", "nul", "bare-lf", "many-headers",
        "same-cl-twice", "cl-list", "cl-plus", "cl-overflow", "te-identity-and-cl", "cl-and-te-xchunked", "te-space-colon", "te-vtab", "bare-lf-before-cl",
        "te-bad-chunk", "fold-first-line", "fold-tab", "nul-in-name", "nul-in-url", "del-in-value", "bare-cr", "unknown-method", "lowercase-method",
        "h2-preface", "http2", "space-after-version", "connect", "upgrade-with-body", "body-over-cap",
    ],
)  # fmt: skip
def test_requests_the_parser_refuses_get_a_json_error_and_one_log_line(limited, raw, status, message):
    server, lines = limited
    for _ in range(3):  # repeated: still one line in the log
        got, headers, body = exchange(server.url, raw)
        assert got == status and headers["content-type"].startswith("application/json")
        assert set(json.loads(body)) == {"error"} and message in json.loads(body)["error"]
    refusals = [line for line in lines if "refused a request" in line]
    assert len(refusals) == 1 and "Traceback" not in "".join(lines)
    assert get_from(server.url, "/block-height", "127.0.0.1") == 200


def test_requests_before_a_refused_one_are_answered_first_in_order(limited):
    server, _ = limited
    with connect(server.url) as sock:
        sock.sendall(b"GET /block-height HTTP/1.1\r\n\r\nGET /info HTTP/1.1\r\nX: a\x00\r\n\r\nGET /block-height HTTP/1.1\r\n\r\n")
        assert read_answer(sock)[0] == 200
        status, _, body = read_answer(sock)
        assert status == 400 and "control characters" in json.loads(body)["error"]
        assert rest_of(sock) == b""  # the request after the refused one is not read


def test_an_upgrade_is_not_made_the_request_is_answered_then_the_connection_closed(limited):
    """curl --http2 on http:// asks for h2c: it gets its answer in HTTP/1.1; what it sends next is not read as HTTP."""
    server, _ = limited
    with connect(server.url) as sock:
        upgrade = b"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n"
        sock.sendall(b"GET /block-height HTTP/1.1\r\n" + upgrade + b"\r\nGET /info HTTP/1.1\r\n\r\n")
        status, headers, body = read_answer(sock)
        assert (status, headers["connection"], json.loads(body)) == (200, "close", {"block_height": TIP})
        assert rest_of(sock) == b""


def test_bytes_llhttp_read_as_a_whole_request_are_served_again_only_at_a_request_start(limited):
    """A read equal to one that llhttp parsed as one whole request is answered from that verdict, but only when
    the connection's parser is between requests: inside a head or after a stray method they are parsed."""
    server, _ = limited
    http = server.server.http
    known = b"GET /block-height HTTP/1.1\r\n\r\n"
    with connect(server.url) as sock:
        for _ in range(3):
            sock.sendall(known)
            assert json.loads(read_answer(sock)[2]) == {"block_height": TIP}
    assert known in http.known
    with connect(server.url) as sock:
        sock.sendall(b"GET /info HTTP/1.1\r\nX-A: 1\r\n")
        wait_until(lambda: any(c._in_head for c in http.connections))
        sock.sendall(known)  # a header line here: its name has spaces
        status, _, body = read_answer(sock)
        assert (status, json.loads(body)["error"].startswith("a header line does not parse")) == (400, True)
    with connect(server.url) as sock:
        sock.sendall(known + b"GE")
        assert read_answer(sock)[0] == 200
        sock.sendall(known)  # "GEGET": not a method
        status, _, body = read_answer(sock)
        assert (status, json.loads(body)["error"].startswith("the method is not implemented")) == (501, True)


def test_2000_bad_requests_log_one_line(kernel_index):
    lines: list[str] = []
    with ServerThread(kernel_index, limits=Limits(per_ip_rate=0), log=lines.append) as server:
        with connect(server.url) as sock:
            for _ in range(2000):
                sock.sendall(b"GET /info HTTP/9.9\r\n\r\n")
                assert read_answer(sock)[0] == 505
                sock.close()
                sock = connect(server.url)
        assert server.server.http.bad_requests == 2000
    assert len(lines) == 1


def test_405_answers_name_the_allowed_methods(limited):
    server, _ = limited
    for raw, allow in [
        (b"POST /info HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", "GET, HEAD, OPTIONS"),
        (b"DELETE /tweaks/101 HTTP/1.1\r\n\r\n", "GET, HEAD, OPTIONS"),
        (b"GET /forward-tx HTTP/1.1\r\n\r\n", "POST, OPTIONS"),
    ]:
        status, headers, body = exchange(server.url, raw)
        assert (status, headers["allow"], set(json.loads(body))) == (405, allow, {"error"})
    status, headers, _ = exchange(server.url, b"OPTIONS /forward-tx HTTP/1.1\r\n\r\n")
    assert (status, headers["allow"], headers["access-control-allow-methods"]) == (204, "POST, OPTIONS", "POST, OPTIONS")


def test_head_answers_the_get_headers_without_a_body(limited):
    server, _ = limited
    with connect(server.url) as sock:
        sock.sendall(b"HEAD /tweak-index/101 HTTP/1.1\r\n\r\nGET /block-height HTTP/1.1\r\n\r\n")
        status, headers, body = read_answer(sock, head=True)  # its Content-Length announces the GET body
        assert (status, body) == (200, b"")
        assert int(headers["content-length"]) == len(json.dumps(ok(f"{server.url}/tweak-index/101"), separators=(",", ":")))
        assert json.loads(read_answer(sock)[2]) == {"block_height": TIP}  # the next answer starts right after


def test_clients_that_never_read_a_large_answer_are_dropped_and_their_buffers_freed(mainnet_index):
    lines: list[str] = []
    with ServerThread(mainnet_index, limits=Limits(write_timeout=0.5), log=lines.append) as server:
        http = server.server.http
        readers = []
        for _ in range(20):
            sock = connect(server.url, OTHER, rcvbuf=4096)
            sock.sendall(f"GET /utxos/{MAINNET_HEIGHT} HTTP/1.1\r\nHost: x\r\n\r\n".encode() * 10)  # 10 × 640 kB, never read
            readers.append(sock)
        wait_until(lambda: http.timeouts["write"] == 20)
        wait_until(lambda: not http.connections and server.server.gate.stats.open["http"] == 0)
        assert get_from(server.url, "/block-height", "127.0.0.1") == 200
        for sock in readers:
            sock.close()
    assert sum("was not read" in line for line in lines) == 1  # one line for 20 drops


def test_the_file_descriptor_soft_limit_is_raised_and_the_cap_keeps_accept_working(kernel_index, tmp_path):
    """systemd's soft limit of 1,024 (lowered further here): raised to the hard limit; more idle clients than
    the cap are refused with 503 at once; no accept() failure or traceback is logged."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    cap = 60

    def lower():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    args = [sys.executable, "-m", "sp_scan.cli", "serve", "--db", str(kernel_index), "--port", "0", "--status-port", "0"]
    args += ["--max-connections", str(cap), "--per-ip-connections", "0", "--idle-timeout", "600"]
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, preexec_fn=lower)
    idle: list[socket.socket] = []
    try:
        first = proc.stderr.readline()
        url = first.split()[2]
        status_url = first.rsplit("status ", 1)[1].strip()
        doc = json.loads(urllib.request.urlopen(f"{status_url}/status", timeout=10).read())
        assert doc["fd_limit"] == hard and doc["connection_cap"] == min(cap, hard - 128)
        refused = 0
        for _ in range(cap + 40):
            sock = connect(url, OTHER)
            idle.append(sock)
        wait_until(lambda: json.loads(urllib.request.urlopen(f"{status_url}/status", timeout=10).read())["connections"]["http"] == cap)
        for sock in idle[cap:]:
            status, _, body = read_answer(sock)
            refused += status == 503 and "connection limit" in json.loads(body)["error"]
        assert refused == 40
        for sock in idle[:5]:
            sock.close()
        wait_until(lambda: get_from(url, "/block-height", "127.0.0.1") == 200)
    finally:
        for sock in idle:
            sock.close()
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err and "out of system resource" not in err
    assert err.count("refused a connection") == 1


# ---- gRPC ----
def test_grpc_connections_and_calls_are_limited_per_address_while_another_is_served(kernel_index):
    limits = Limits(per_ip_connections=5, per_ip_rate=20, per_ip_burst=20, per_ip_exempt=())  # the channel is from 127.0.0.1
    with ServerThread(kernel_index, limits=limits, grpc_port=0, log=lambda line: None) as server:
        target = server.server.urls["grpc"]
        host, port = target.rsplit(":", 1)
        flood = [socket.create_connection((host, int(port)), timeout=30, source_address=(OTHER, 0)) for _ in range(5)]
        wait_until(lambda: server.server.gate.stats.open["grpc"] == 5)
        with socket.create_connection((host, int(port)), timeout=30, source_address=(OTHER, 0)) as extra:
            assert closed_by_server(extra)  # over the per-address cap: closed at once
        assert server.server.gate.stats.refused_per_ip == 1
        with grpc.insecure_channel(target, options=[("grpc.enable_http_proxy", 0)]) as channel:
            height = channel.unary_unary(
                "/blindbit.oracle.v1.OracleService/GetBestBlockHeight",
                request_serializer=empty_pb2.Empty.SerializeToString,
                response_deserializer=pb.BlockHeightResponse.FromString,
            )
            codes = []
            for _ in range(40):
                try:
                    codes.append(height(empty_pb2.Empty(), timeout=30).block_height)
                except grpc.RpcError as err:
                    codes.append(err.code())
        assert codes[:20] == [TIP] * 20 and grpc.StatusCode.RESOURCE_EXHAUSTED in codes
        for sock in flood:
            sock.close()


def test_grpc_clients_that_make_one_call_and_close_are_no_longer_counted(kernel_index):
    """30 channels one after another, each one call then closed: each leaves the count, none locks the address out."""
    limits = Limits(per_ip_connections=10, per_ip_exempt=())
    with ServerThread(kernel_index, limits=limits, grpc_port=0, log=lambda line: None) as server:
        gate = server.server.gate
        for _ in range(30):
            with grpc.insecure_channel(server.server.urls["grpc"], options=[("grpc.enable_http_proxy", 0)]) as channel:
                height = channel.unary_unary(
                    "/blindbit.oracle.v1.OracleService/GetBestBlockHeight",
                    request_serializer=empty_pb2.Empty.SerializeToString,
                    response_deserializer=pb.BlockHeightResponse.FromString,
                )
                assert height(empty_pb2.Empty(), timeout=30).block_height == TIP
            wait_until(lambda: gate.stats.open["grpc"] == 0 and not server.server.grpc.clients)
        assert gate.stats.refused_per_ip == 0
        assert get_from(server.url, "/block-height", "127.0.0.1") == 200


# ---- the access log ----
def test_the_access_log_has_a_line_per_request_and_no_query_values_but_dust(kernel_index, tmp_path):
    log = tmp_path / "access.log"
    with ServerThread(kernel_index, access_log=str(log)) as server:
        ok(f"{server.url}/tweaks/101?dustLimit=5&scan_key=deadbeef")
        exchange(server.url, b"GET /info HTTP/9.9\r\n\r\n")  # refused by the parser: not a request line to log
        ok(f"{server.url}/block-height")
    lines = log.read_text().splitlines()
    assert len(lines) == 2
    assert '"GET /tweaks/101?dustLimit=5" 200' in lines[0] and "deadbeef" not in log.read_text() and "scan_key" not in log.read_text()
    assert lines[1].split()[1] == "127.0.0.1"


def test_requests_served_while_other_threads_hammer_keep_their_answers(limited):
    """Sanity for the hit path: answers from the cache are the same bytes as the first, built, answer."""
    server, _ = limited
    first = ok(f"{server.url}/utxos/104")
    results, errors = [], []

    def client():
        try:
            results.append(ok(f"{server.url}/utxos/104"))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=client) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and results == [first] * 10
    assert server.server.cache.hits >= 10


def test_pipelined_requests_past_the_read_pause_and_a_half_close_are_all_answered(kernel_index):
    """A client that pipelines more than one request's worth of bytes behind an answer being built, then
    shuts its write side: every request is answered in order, then the server closes."""
    with ServerThread(kernel_index) as server:
        pipelined(server)


def pipelined(server) -> None:
    paths = [f"/utxos/{h}" for h in range(95, 111)] * 5  # 80; the first ones are built on reader threads
    filler = "X-Pad: " + "p" * 7000 + "\r\n"  # heads near the size cap, so the backlog passes the pause mark
    with connect(server.url) as sock:
        sock.sendall("".join(f"GET {p} HTTP/1.1\r\n{filler}\r\n" for p in paths[:70]).encode())
        sock.shutdown(socket.SHUT_WR)
        answers = [read_answer(sock) for _ in range(70)]
        assert closed_by_server(sock)
    assert [json.loads(body) for _, _, body in answers] == [ok(f"{server.url}{p}") for p in paths[:70]]


# ---- the Electrum listener on the same gate ----
def with_electrum(kernel_index, limits: Limits, **options) -> ServerThread:
    from sp_scan.server.electrum import ElectrumServer

    return ServerThread(kernel_index, limits=limits, electrum=ElectrumServer(kernel_index, "127.0.0.1", 0), log=lambda line: None, **options)


def electrum_from(server: ServerThread, source: str) -> RawClient:
    sock = socket.create_connection(("127.0.0.1", server.server.electrum.port), timeout=30, source_address=(source, 0))
    return RawClient(0, sock=sock)


def refused_unanswered(client: RawClient) -> bool:
    """True when the Electrum listener closed the connection without answering (as Frigate refuses one)."""
    try:
        client.send("server.version", ["t", "1.4"])
        return client.read() is None
    except (ConnectionResetError, BrokenPipeError):
        return True


def test_an_electrum_flood_from_one_address_is_limited_there_and_over_http_while_another_address_is_served(kernel_index):
    limits = Limits(per_ip_rate=0.01, per_ip_burst=20)
    with with_electrum(kernel_index, limits) as server:
        with electrum_from(server, OTHER) as flood:
            assert flood.result("server.version", ["flood", "1.4"])[1] == "1.4"  # a call: one token of 20
            ids = [flood.send("server.ping") for _ in range(40)]
            answers = [flood.answer(i) for i in ids]
            assert sum("result" in a for a in answers) == 19
            refusals = [a["error"] for a in answers if "error" in a]
            assert refusals == [{"code": -101, "message": "too many requests from your address; slow down"}] * 21
            assert get_from(server.url, "/block-height", OTHER) == 429  # the address's bucket is every listener's
            with electrum_from(server, THIRD) as other:
                assert other.result("server.version", ["other", "1.4"])[1] == "1.4"
                assert other.result("server.ping") is None
            assert get_from(server.url, "/block-height", THIRD) == 200
        assert server.server.gate.stats.rate_limited == 22
        assert server.server.request_counts()["electrum"] == 43


def test_the_per_address_connection_cap_counts_http_grpc_and_electrum_connections_together(kernel_index):
    with with_electrum(kernel_index, Limits(per_ip_connections=3), grpc_port=0) as server:
        gate = server.server.gate
        host, port = server.server.urls["grpc"].rsplit(":", 1)
        held = [connect(server.url, OTHER), socket.create_connection((host, int(port)), timeout=30, source_address=(OTHER, 0))]
        with electrum_from(server, OTHER) as third:
            assert third.result("server.version", ["t", "1.4"])[1] == "1.4"
            wait_until(lambda: gate.stats.open == {"http": 1, "grpc": 1, "electrum": 1})
            with electrum_from(server, OTHER) as fourth:
                assert refused_unanswered(fourth)
            status, _, body = read_answer(connect(server.url, OTHER))
            assert (status, json.loads(body)) == (429, {"error": "too many connections from your address"})
            with socket.create_connection((host, int(port)), timeout=30, source_address=(OTHER, 0)) as extra:
                assert closed_by_server(extra)
            assert gate.stats.refused_per_ip == 3
            with electrum_from(server, THIRD) as other:  # another address is served
                assert other.result("server.version", ["t", "1.4"])[1] == "1.4"
        for sock in held:
            sock.close()
        wait_until(lambda: gate.open_connections == 0)


def test_the_total_cap_counts_every_listener_and_the_exempt_loopback_too(kernel_index):
    with with_electrum(kernel_index, Limits(max_connections=4, per_ip_connections=1)) as server:
        gate = server.server.gate
        http = [connect(server.url) for _ in range(2)]
        electrum = [electrum_from(server, "127.0.0.1") for _ in range(2)]  # 127.0.0.1: over the per-address cap of 1
        for client in electrum:
            assert client.result("server.version", ["t", "1.4"])[1] == "1.4"
        wait_until(lambda: gate.stats.open == {"http": 2, "electrum": 2})
        with electrum_from(server, THIRD) as over:
            assert refused_unanswered(over)
        status, _, body = read_answer(connect(server.url, THIRD))
        assert status == 503 and "connection limit" in json.loads(body)["error"]
        assert gate.stats.refused_total == 2
        electrum.pop().close()
        wait_until(lambda: gate.open_connections == 3)
        assert get_from(server.url, "/block-height", THIRD) == 200
        for sock in http:
            sock.close()
        for client in electrum:
            client.close()


def test_loopback_clients_skip_the_per_address_caps_and_rate_on_every_listener_alike(kernel_index):
    limits = Limits(per_ip_connections=1, per_ip_rate=0.01, per_ip_burst=2)
    with with_electrum(kernel_index, limits, grpc_port=0) as server:
        gate = server.server.gate
        sockets = [connect(server.url) for _ in range(3)]
        assert [get_from(server.url, "/block-height", "127.0.0.1") for _ in range(5)] == [200] * 5
        clients = [electrum_from(server, "127.0.0.1") for _ in range(3)]
        for client in clients:
            assert client.result("server.version", ["t", "1.4"])[1] == "1.4" and client.result("server.ping") is None
        with grpc.insecure_channel(server.server.urls["grpc"], options=[("grpc.enable_http_proxy", 0)]) as channel:
            height = channel.unary_unary(
                "/blindbit.oracle.v1.OracleService/GetBestBlockHeight",
                request_serializer=empty_pb2.Empty.SerializeToString,
                response_deserializer=pb.BlockHeightResponse.FromString,
            )
            assert [height(empty_pb2.Empty(), timeout=30).block_height for _ in range(5)] == [TIP] * 5
        assert gate.stats.refused_per_ip == 0 and gate.stats.rate_limited == 0
        with electrum_from(server, OTHER) as first, electrum_from(server, OTHER) as second:  # 127.0.0.2 is not exempt
            assert first.result("server.version", ["t", "1.4"])[1] == "1.4" and refused_unanswered(second)
        for sock in sockets:
            sock.close()
        for client in clients:
            client.close()


def test_per_ip_exempt_none_holds_loopback_to_the_per_address_caps_on_every_listener(kernel_index):
    args = [sys.executable, "-m", "sp_scan.cli", "serve", "--db", str(kernel_index), "--port", "0", "--electrum-port", "0"]
    proc = subprocess.Popen([*args, "--per-ip-connections", "1", "--per-ip-exempt", "none"], stderr=subprocess.PIPE, text=True)
    try:
        electrum_port = int(proc.stderr.readline().split("127.0.0.1:")[1].split()[0])
        url = proc.stderr.readline().split()[2]
        with socket.create_connection(("127.0.0.1", electrum_port), timeout=30) as held:
            with RawClient(electrum_port) as first:
                assert refused_unanswered(first)  # the one connection 127.0.0.1 may hold is `held`
            status, _, body = read_answer(connect(url))
            assert (status, json.loads(body)) == (429, {"error": "too many connections from your address"})
            held.sendall(b'{"jsonrpc": "2.0", "id": 1, "method": "server.version", "params": ["t", "1.4"]}\n')
            assert json.loads(held.makefile("rb").readline())["result"][1] == "1.4"
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "Traceback" not in err, err


# ---- what one Electrum connection may hold ----
def pipeline_block_tweaks(port: int, count: int) -> socket.socket:
    """A client that sends server.version and `count` blockchain.block.tweaks calls at once and never reads."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(60)
    sock.connect(("127.0.0.1", port))
    lines = [{"jsonrpc": "2.0", "id": 0, "method": "server.version", "params": ["t", "1.4"]}]
    lines += [{"jsonrpc": "2.0", "id": i, "method": "blockchain.block.tweaks", "params": [MAINNET_HEIGHT]} for i in range(1, count + 1)]
    data = b"".join(json.dumps(line).encode() + b"\n" for line in lines)

    def send() -> None:
        try:
            sock.sendall(data)
        except OSError:
            pass  # dropped while sending

    threading.Thread(target=send, daemon=True).start()
    return sock


def test_an_electrum_client_that_pipelines_2000_calls_and_never_reads_has_at_most_max_in_flight_of_them_read(mainnet_index):
    """Each answer is ~100 kB; all 2,000 read at once held ~600 MB. The server reads a line only while fewer
    than max_in_flight requests wait for the socket, then drops the client once an answer waited the write
    timeout. The socket itself takes answers up to the kernel's largest send buffer (tcp_wmem's maximum)
    and asyncio's high-water mark."""
    from electrum_support import ElectrumThread

    with ElectrumThread(mainnet_index, gate=Gate(Limits(write_timeout=2.0), ("electrum",))) as server:
        with RawClient(server.port) as c:
            c.result("server.version", ["t", "1.4"])
            answer = len(json.dumps(c.call("blockchain.block.tweaks", [MAINNET_HEIGHT])))
        state = server.server.state
        read_before = state.requests
        with pipeline_block_tweaks(server.port, 2000):
            wait_until(lambda: state.requests > read_before and not state.sessions)  # dropped for not reading
        socket_holds = -(-(int(Path("/proc/sys/net/ipv4/tcp_wmem").read_text().split()[2]) + 65536) // answer) + 1
        assert state.requests - read_before <= 1 + 20 + socket_holds  # server.version, ElectrumLimits().max_in_flight


def test_stopping_after_a_pipelining_client_was_dropped_leaves_no_task_exception_unretrieved(mainnet_index):
    import gc

    from electrum_support import ElectrumThread

    seen: list[dict] = []
    with ElectrumThread(mainnet_index, gate=Gate(Limits(write_timeout=1.0), ("electrum",))) as server:
        server.loop.set_exception_handler(lambda loop, context: seen.append(context))
        state = server.server.state
        with pipeline_block_tweaks(server.port, 300):
            wait_until(lambda: state.requests > 0 and not state.sessions)
    gc.collect()
    assert [context.get("message") for context in seen] == []


def test_an_electrum_line_begun_and_not_finished_within_the_header_timeout_is_closed_while_others_are_served(kernel_index):
    from electrum_support import ElectrumThread

    with ElectrumThread(kernel_index, gate=Gate(Limits(header_timeout=0.5), ("electrum",))) as server:
        with RawClient(server.port) as slow, RawClient(server.port) as other:
            slow.sock.sendall(b'{"jsonrpc": "2.0", "id": 1, "method": "server.version", "params": ["slow"')  # and never the rest
            other.sock.sendall(b'{"jsonrpc": "2.0", "id": 1, "method": "server.version", ')  # the rest follows at once
            other.sock.sendall(b'"params": ["t", "1.4"]}\n')
            assert other.answer(1)["result"][1] == "1.4"
            try:  # the socket's 60 s timeout only guards a failure
                assert rest_of(slow.sock) == b""
            except ConnectionResetError:
                pass
            assert other.result("server.ping") is None
