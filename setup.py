"""Build of the C extensions; the rest of the metadata lives in pyproject.toml."""

from glob import glob

from setuptools import Extension, setup

NATIVE = "sp_scan/native"
HASH_SOURCES = [f"{NATIVE}/sha256.c", f"{NATIVE}/ripemd160.c", f"{NATIVE}/siphash.c"]
HEADERS = sorted(glob(f"{NATIVE}/*.h"))  # an edited header rebuilds every extension
CORE_SOURCES = sorted(glob(f"{NATIVE}/core*.c")) + HASH_SOURCES
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
            CORE_SOURCES,
            depends=HEADERS,
            extra_compile_args=[*CFLAGS, "-pthread"],
            extra_link_args=["-pthread"],  # the batch scan's worker threads
        ),
        # Test-only: the same stages plus the engines' test hooks and the emulated IFMA core
        # (testing_*.c); only sp_scan/native/_testing.py imports it, never the library.
        Extension(
            "sp_scan.native._testcore",
            CORE_SOURCES + sorted(glob(f"{NATIVE}/testing_ec_*.c")),
            depends=[*HEADERS, f"{NATIVE}/testing_hooks.c"],
            define_macros=[("SPN_TESTING", "1")],
            extra_compile_args=[*CFLAGS, "-pthread"],
            extra_link_args=["-pthread"],
        ),
    ],
)
