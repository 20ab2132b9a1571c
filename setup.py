"""Build of the C extensions; the rest of the metadata lives in pyproject.toml."""

from glob import glob

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NATIVE = "sp_scan/native"
HASH_SOURCES = [f"{NATIVE}/sha256.c", f"{NATIVE}/ripemd160.c", f"{NATIVE}/siphash.c"]
HEADERS = sorted(glob(f"{NATIVE}/*.h"))  # an edited header rebuilds every extension
CORE_SOURCES = sorted(glob(f"{NATIVE}/core*.c")) + HASH_SOURCES
CFLAGS = ["-O2", "-std=c11", "-Wall", "-Wextra", "-fvisibility=hidden"]
TESTCORE = "sp_scan.native._testcore"


class BuildExt(build_ext):
    """The test-only extension is built in place only (`pip install -e`, `setup.py build_ext --inplace`: the tests run
    from the tree): a wheel and an sdist leave it out."""

    def finalize_options(self):
        super().finalize_options()
        if not (self.inplace or getattr(self, "editable_mode", False)):
            self.extensions = [e for e in self.extensions if e.name != TESTCORE]

setup(
    cmdclass={"build_ext": BuildExt},
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
            TESTCORE,
            CORE_SOURCES + sorted(glob(f"{NATIVE}/testing_ec_*.c")),
            depends=[*HEADERS, f"{NATIVE}/testing_hooks.c"],
            define_macros=[("SPN_TESTING", "1")],
            extra_compile_args=[*CFLAGS, "-pthread"],
            extra_link_args=["-pthread"],
        ),
    ],
)
