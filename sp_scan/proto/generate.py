"""Regenerate blindbit_oracle_pb2.py (and .pyi) from blindbit_oracle.proto, or check it against blindbit-lib's.

    pip install grpcio-tools
    python sp_scan/proto/generate.py                          # regenerate
    python sp_scan/proto/generate.py --check BLINDBIT_LIB/proto  # same wire format as upstream?

`--check` compiles the upstream files (indexing_server.proto and oracle_service.proto of a
setavenger/blindbit-lib checkout, 1a34ab63339d69c3b4c1b5855b509f3f8b24cba4 for this file) and
ours, and compares every message (field names, numbers, types, labels) and the service's methods.
Only the message classes are generated: the service is registered by name in `sp_scan.server.v2`,
so serving needs protobuf at run time, not grpcio-tools.
"""

import pathlib
import sys
import tempfile

from google.protobuf import descriptor_pb2
from grpc_tools import protoc

HERE = pathlib.Path(__file__).resolve().parent
INCLUDE = pathlib.Path(protoc.__file__).parent / "_proto"
PACKAGE = "blindbit.oracle.v1"


def _shape(proto_dir: pathlib.Path, files: list[str]) -> tuple[dict, dict]:
    """(messages, services) of PACKAGE in the given .proto files: what their wire format is made of."""
    with tempfile.TemporaryDirectory() as scratch:
        out = pathlib.Path(scratch) / "set.pb"
        args = ["protoc", f"-I{proto_dir}", f"-I{INCLUDE}", f"--descriptor_set_out={out}", *(str(proto_dir / f) for f in files)]
        if protoc.main(args) != 0:
            raise SystemExit(f"protoc failed on {proto_dir}")
        descriptors = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    messages, services = {}, {}
    for f in descriptors.file:
        if f.package != PACKAGE:
            continue
        for m in f.message_type:
            messages[m.name] = sorted((x.name, x.number, x.type, x.label, x.type_name) for x in m.field)
        for s in f.service:
            services[s.name] = sorted((x.name, x.input_type, x.output_type, x.client_streaming, x.server_streaming) for x in s.method)
    return messages, services


def check(upstream: pathlib.Path) -> int:
    ours = _shape(HERE, ["blindbit_oracle.proto"])
    theirs = _shape(upstream, ["indexing_server.proto", "oracle_service.proto"])
    if ours == theirs:
        print(f"same wire format: {len(ours[0])} messages, {sum(map(len, ours[1].values()))} methods")
        return 0
    for kind, a, b in (("message", ours[0], theirs[0]), ("service", ours[1], theirs[1])):
        for name in sorted(set(a) | set(b)):
            if a.get(name) != b.get(name):
                print(f"{kind} {name}: ours {a.get(name)} upstream {b.get(name)}")
    return 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--check"] and len(sys.argv) == 3:
        sys.exit(check(pathlib.Path(sys.argv[2])))
    args = ["protoc", f"-I{HERE}", f"-I{INCLUDE}", f"--python_out={HERE}", f"--pyi_out={HERE}", str(HERE / "blindbit_oracle.proto")]
    sys.exit(protoc.main(args))
