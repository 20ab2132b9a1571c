"""Test support for the wallet's remote sources: stand-ins in front of the project's own servers that can hold,
cut off or rewrite what they answer.

- `GrpcProxy(upstream)`: a gRPC server on 127.0.0.1 relaying every OracleService call to `sp-scan serve`'s
  gRPC listener, each message decoded so a test can change it.
- `JsonRpcProxy(port)`: a TCP relay of newline-delimited JSON-RPC to an Electrum listener, each line from the
  server decoded so a test can change it.

Knobs (both, blindbit_support.Knobs): `tamper` rewrites what the server sends (return a new value, bytes to send as they are, or None
to send it unchanged); `hold(pred)` keeps back what matches until `release()` (`held` counts it);
`stop_answering(after)` lets `after` more server messages through, then cuts every connection and refuses new
ones until `resume_answering()`; `cut_once(pred)` cuts off the first message matching pred (a gRPC call ends
UNAVAILABLE, an Electrum connection is closed), and only that one; `seen` records what the client sent.
"""

from __future__ import annotations

import json
import socket
import threading
from concurrent import futures

import grpc
from google.protobuf import empty_pb2

from blindbit_support import Knobs
from sp_scan.proto import blindbit_oracle_pb2 as pb

SERVICE = "blindbit.oracle.v1.OracleService"
_METHODS = {  # name: (request, reply, streams)
    "GetInfo": (empty_pb2.Empty, pb.InfoResponse, False),
    "GetBestBlockHeight": (empty_pb2.Empty, pb.BlockHeightResponse, False),
    "GetBlockHashByHeight": (pb.BlockHeightRequest, pb.BlockHashResponse, False),
    "GetFullBlock": (pb.BlockHeightRequest, pb.FullBlockResponse, False),
    "GetSpentOutputsShort": (pb.BlockHeightRequest, pb.IndexResponse, False),
    "StreamBlockScanDataShort": (pb.RangedBlockHeightRequestFiltered, pb.BlockScanDataShortResponse, True),
    "StreamComputeIndex": (pb.RangedBlockHeightRequestFiltered, pb.ComputeIndexResponse, True),
}


class GrpcProxy(Knobs):
    """OracleService relayed to `upstream` ("host:port"); `.target` reaches the proxy.

    `tamper(name, message)` sees each reply message (a stream's one by one); `hold(pred)` takes
    pred(name, message); `seen` holds (name, request) of every call.
    """

    def __init__(self, upstream: str) -> None:
        super().__init__()
        self.upstream = grpc.insecure_channel(upstream, options=[("grpc.enable_http_proxy", 0)])
        self.server = grpc.server(futures.ThreadPoolExecutor(16), options=[("grpc.so_reuseport", 0)])
        handlers = {}
        for name, (request, reply, streams) in _METHODS.items():
            kind = grpc.unary_stream_rpc_method_handler if streams else grpc.unary_unary_rpc_method_handler
            handlers[name] = kind(self._relay(name, request, reply, streams), request.FromString, _raw)
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        self.target = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"

    def __enter__(self) -> GrpcProxy:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self.server.stop(0)
        self.upstream.close()

    def count(self, name: str) -> int:
        with self.lock:
            return sum(n == name for n, _ in self.seen)

    def _out(self, name: str, message, context):
        if not self._spend() or self._cut_here(name, message):
            context.abort(grpc.StatusCode.UNAVAILABLE, "the stand-in stopped answering")
        self._wait(name, message)
        tamper = self.tamper
        changed = tamper(name, message) if tamper is not None else None
        if changed is None:
            return message.SerializeToString()
        return changed if isinstance(changed, bytes) else changed.SerializeToString()

    def _relay(self, name: str, request_type, reply, streams: bool):
        path = f"/{SERVICE}/{name}"

        def unary(request, context):
            with self.lock:
                self.seen.append((name, request))
            call = self.upstream.unary_unary(path, request_serializer=request_type.SerializeToString, response_deserializer=reply.FromString)
            try:
                message = call(request, timeout=60)
            except grpc.RpcError as exc:
                context.abort(exc.code(), exc.details())
            return self._out(name, message, context)

        def stream(request, context):
            with self.lock:
                self.seen.append((name, request))
            call = self.upstream.unary_stream(path, request_serializer=request_type.SerializeToString, response_deserializer=reply.FromString)
            upstream = call(request, timeout=120)
            context.add_callback(upstream.cancel)
            try:
                for message in upstream:
                    yield self._out(name, message, context)
            except grpc.RpcError as exc:
                if exc.code() != grpc.StatusCode.CANCELLED:
                    context.abort(exc.code(), exc.details())

        return stream if streams else unary


def _raw(data: bytes) -> bytes:
    return data


class JsonRpcProxy(Knobs):
    """Newline-delimited JSON-RPC relayed to 127.0.0.1:`port`; `.port` reaches the proxy.

    `tamper(message, request)`, `hold(pred)`'s pred(message, request) and `cut_once`'s pred see each message
    the server sends with the client's request it answers (None for a notification); `seen` holds every
    request the client sent (parsed).
    """

    def __init__(self, port: int) -> None:
        super().__init__()
        self.target_port = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.refusing = False
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def __enter__(self) -> JsonRpcProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self.listener.close()
        self._cut()

    def methods(self) -> list[str]:
        """The methods the client called, in order."""
        with self.lock:
            return [m.get("method") for m in self.seen if isinstance(m, dict)]

    def stop_answering(self, after: int = 0) -> None:
        super().stop_answering(after)
        if after <= 0:
            self._cut()

    def resume_answering(self) -> None:
        super().resume_answering()
        self.refusing = False

    def _cut(self) -> None:
        self.refusing = True
        with self.lock:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.refusing:
                client.close()
                continue
            server = socket.create_connection(("127.0.0.1", self.target_port))
            with self.lock:
                self.conns += [client, server]
            asked: dict = {}
            threading.Thread(target=self._upstream, args=(client, server, asked), daemon=True).start()
            threading.Thread(target=self._downstream, args=(server, client, asked), daemon=True).start()

    def _upstream(self, client: socket.socket, server: socket.socket, asked: dict) -> None:
        try:
            for line in client.makefile("rb"):
                try:
                    message = json.loads(line)
                except ValueError:
                    message = None
                with self.lock:
                    for m in message if isinstance(message, list) else [message]:
                        self.seen.append(m)
                        if isinstance(m, dict) and "id" in m:
                            asked[m["id"]] = m
                server.sendall(line)
        except OSError:
            pass
        _close(client, server)

    def _downstream(self, server: socket.socket, client: socket.socket, asked: dict) -> None:
        try:
            for line in server.makefile("rb"):
                message = json.loads(line)
                with self.lock:
                    request = asked.pop(message.get("id"), None) if isinstance(message, dict) and message.get("id") is not None else None
                if not self._spend():
                    self._cut()
                    break
                if self._cut_here(message, request):
                    break
                self._wait(message, request)
                tamper = self.tamper
                changed = tamper(message, request) if tamper is not None else None
                if changed is not None:
                    line = changed if isinstance(changed, bytes) else json.dumps(changed).encode() + b"\n"
                client.sendall(line)
        except OSError:
            pass
        _close(client, server)


def _close(*sockets: socket.socket) -> None:
    for s in sockets:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
