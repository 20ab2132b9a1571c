"""Regenerate blindbit_oracle_pb2.py (and .pyi) from blindbit_oracle.proto.

    pip install grpcio-tools && python sp_scan/server/proto/generate.py

Only the message classes are generated: the service is registered by name in `sp_scan.server.v2`,
so the module needs protobuf at run time, not grpcio-tools.
"""

import pathlib
import sys

from grpc_tools import protoc

HERE = pathlib.Path(__file__).resolve().parent

if __name__ == "__main__":
    include = pathlib.Path(protoc.__file__).parent / "_proto"
    args = ["protoc", f"-I{HERE}", f"-I{include}", f"--python_out={HERE}", f"--pyi_out={HERE}", str(HERE / "blindbit_oracle.proto")]
    sys.exit(protoc.main(args))
