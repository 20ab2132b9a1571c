"""Build of the C extensions; the rest of the metadata lives in pyproject.toml."""

from glob import glob

from setuptools import Extension, setup

NATIVE = "sp_scan/native"
HASH_SOURCES = [f"{NATIVE}/sha256.c", f"{NATIVE}/ripemd160.c"]
HEADERS = sorted(glob(f"{NATIVE}/*.h"))  # an edited header rebuilds both extensions
CFLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-fvisibility=hidden"]

setup(
    ext_modules=[
        Extension(
            "sp_scan.native._hash",
            [f"{NATIVE}/hashmod.c", f"{NATIVE}/gcs.c", *HASH_SOURCES],
            depends=HEADERS,
            extra_compile_args=CFLAGS,
        ),
        Extension(
            "sp_scan.native._core",
            sorted(glob(f"{NATIVE}/core*.c")) + HASH_SOURCES,
            depends=HEADERS,
            extra_compile_args=[*CFLAGS, "-pthread"],
            extra_link_args=["-pthread"],  # the batch scan's worker threads
        ),
    ],
)
