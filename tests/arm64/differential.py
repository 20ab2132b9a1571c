"""The ARM64 C differential: `python -m tests.arm64.differential [N] [--seed S] [--native] [--keep DIR]`.

Builds tests/arm64/driver.c with the scalar engine core and sp_scan/native's portable C for aarch64
(Debian's aarch64-linux-gnu-gcc, -static: no Python, no libsecp256k1), runs it under qemu-aarch64
(-cpu max, so the ARMv8 SHA2 path runs too) on N random requests generated here, and checks every
answer against libsecp256k1 (coincurve), hashlib, python-bitcoinlib's RIPEMD160 or Python integers.
Half the requests go to the engine core: point parsing (valid, x or y >= p, off the curve, bad
prefix), b·T with a recoded scan key (scan keys near n and at the GLV split's edges among them),
b·s·T with per-lane scalars, input_hash·A, B + t·G (t = 0, >= n, B + t·G at infinity), P + L_m
(doublings, infinity) and its field operations on unreduced values, in batches of 1 to 150 so the
batched inversions and partial groups are crossed; the other half to the scalar code mod n
(multiplication, addition, reduction, the GLV split and its signed digits), SHA256 and the BIP352
tagged hashes (portable and the selected compression), HASH160 and the x-coordinate check.
`--native` builds for this machine with `cc` instead (no qemu): the same driver and checks.

Needs gcc-aarch64-linux-gnu, libc6-dev-arm64-cross and qemu-user (Debian packages). `.ci/run` runs
3,000 requests; the long run is `python -m tests.arm64.differential 200000`. Exit 0 when every answer
matches, 1 with the first differences (the request file and the driver's output are kept).
"""

from __future__ import annotations

import argparse
import hashlib
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bitcoin.core.contrib.ripemd160 import ripemd160
from coincurve import PublicKey

ROOT = Path(__file__).resolve().parents[2]
NATIVE = ROOT / "sp_scan" / "native"
DRIVER = Path(__file__).resolve().parent / "driver.c"
TOOLS = {"aarch64": ("aarch64-linux-gnu-gcc", "qemu-aarch64"), "native": ("cc",)}
PACKAGES = "gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"

N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
P = 2**256 - 2**32 - 977
LAMBDA = 0x5363AD4CC05C30E0A5261C028812645A122E22EA20816678DF02967C1B23BD72
EDGE_SCALARS = [1, 2, 3, N - 1, N - 2, N // 2, N // 2 + 1, LAMBDA, N - LAMBDA, 2**128 - 1, 2**128, 2**128 + 1,
                (2**128 * LAMBDA) % N, 2**255]
BAD_SCALARS = [0, N, N + 1, 2**256 - 1]  # a core answers "-" for these
TAGS = (b"BIP0352/Inputs", b"BIP0352/SharedSecret", b"BIP0352/Label")
FE_OPS = {"mul": 0, "sqr": 1, "inv": 2, "sqrt": 3, "add": 4, "sub": 5, "neg": 6, "mul21": 7}

Check = Callable[[str], bool]


@dataclass(frozen=True)
class Request:
    """One line for the driver and the answer it must give (a string, or a predicate on the answer)."""

    line: str
    want: str | Check


def missing_tools(target: str) -> list[str]:
    return [t for t in TOOLS[target] if shutil.which(t) is None]


SOURCES = ("core_ec_scalar.c", "core_scalar.c", "sha256.c", "ripemd160.c", "core_fe.c")
"""What the driver links from sp_scan/native: the scalar engine core and the portable code beside it."""


def build(target: str, out_dir: Path) -> Path:
    """Compile the driver for `target` ("aarch64" or "native"); returns the executable.

    --gc-sections drops core_fe.c's spn_valid_x, the one function there that calls libsecp256k1
    (spn_lift_x on spn_ctx, from core_ecc.c and the module's bindings).
    """
    exe = out_dir / f"driver-{target}"
    cc = TOOLS[target][0]
    cmd = [cc, "-O2", "-std=c11", "-Wall", "-Wextra", "-ffunction-sections", "-fdata-sections", "-Wl,--gc-sections",
           f"-I{NATIVE}", "-DSPN_DRIVER_CORE=spn_ec_scalar", str(DRIVER), *(str(NATIVE / f) for f in SOURCES), "-o", str(exe)]
    if target == "aarch64":
        cmd.insert(1, "-static")
    subprocess.run(cmd, check=True)
    return exe


def run(target: str, exe: Path, request_file: Path) -> list[str]:
    cmd = ["qemu-aarch64", "-cpu", "max", str(exe)] if target == "aarch64" else [str(exe)]
    with request_file.open("rb") as stdin:
        out = subprocess.run(cmd, stdin=stdin, capture_output=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"driver exited {out.returncode}: {out.stderr.decode(errors='replace').strip()}")
    return out.stdout.decode().splitlines()


# ---- the requests and their expected answers ----


def h32(k: int) -> str:
    return k.to_bytes(32, "big").hex()


def xy(point: PublicKey) -> str:
    return point.format(compressed=False)[1:].hex()


def ser_xy(point: PublicKey | None) -> str:
    return "-" if point is None else f"{point.format().hex()}:{xy(point)}"


def ser(point: PublicKey | None) -> str:
    return "-" if point is None else point.format().hex()


def times(point: PublicKey, k: int) -> PublicKey | None:
    """k·point, or None when k is not in [1, n)."""
    return point.multiply(k.to_bytes(32, "big")) if 0 < k < N else None


def add(*points: PublicKey) -> PublicKey | None:
    try:
        return PublicKey.combine_keys(list(points))
    except ValueError:  # infinity
        return None


def scalar(rng: random.Random) -> int:
    return rng.choice(EDGE_SCALARS) if rng.random() < 0.1 else rng.randrange(1, N)


def point(rng: random.Random, near_p: list[PublicKey]) -> PublicKey:
    if near_p and rng.random() < 0.05:
        return rng.choice(near_p)
    return PublicKey.from_secret(scalar(rng).to_bytes(32, "big"))


def points_near_p(count: int) -> list[PublicKey]:
    """Points whose x is just below p, in both parities."""
    out: list[PublicKey] = []
    x = P - 1
    while len(out) < count:
        if pow(x**3 + 7, (P - 1) // 2, P) == 1:
            out += [PublicKey(bytes([prefix]) + x.to_bytes(32, "big")) for prefix in (2, 3)]
        x -= 1
    return out


def off_curve_x(rng: random.Random) -> bytes:
    """An x below p that no point has."""
    while True:
        x = rng.randrange(P)
        if pow(x**3 + 7, (P - 1) // 2, P) != 1:
            return x.to_bytes(32, "big")


def encode(pt: PublicKey, width: int) -> str:
    return pt.format().hex() if width == 33 else xy(pt)


def glv_check(k: int) -> Check:
    """The driver's recoding of k: k ≡ ±K0 ± K1·λ (mod n), K_h = Σ d_i·32^i in [0, 2^128), d_i in [−15, 16]."""

    def ok(answer: str) -> bool:
        signs, *halves = answer.split()
        if len(signs) != 2 or set(signs) - {"0", "1"} or len(halves) != 2:
            return False
        values = []
        for h in halves:
            digits = [b - 256 if b >= 128 else b for b in bytes.fromhex(h)]
            if len(digits) != 26 or any(not -15 <= d <= 16 for d in digits):
                return False
            values.append(sum(d * 32**i for i, d in enumerate(digits)))
        if any(not 0 <= v < 2**128 for v in values):
            return False
        k0, k1 = (-v if s == "1" else v for v, s in zip(values, signs))
        return (k0 + k1 * LAMBDA - k) % N == 0

    return ok


def tagged(tag: bytes, msg: bytes) -> bytes:
    t = hashlib.sha256(tag).digest()
    return hashlib.sha256(t + t + msg).digest()


def message(rng: random.Random) -> bytes:
    return rng.randbytes(rng.choice([0, 1, 33, 36, 55, 56, 63, 64, 65, 119, 120, 128, rng.randrange(300)]))


def hex_or_dash(data: bytes) -> str:
    return data.hex() or "-"


def scalar_request(rng: random.Random) -> Request:
    op = rng.choice(["smul", "sadd", "sred", "glv", "glv"])
    if op == "smul":
        a, b = (rng.choice([rng.getrandbits(256), scalar(rng), N - 1, 2**256 - 1]) for _ in range(2))
        return Request(f"smul {h32(a)} {h32(b)}", h32(a * b % N))
    if op == "sadd":
        a, b = (rng.choice([rng.randrange(N), scalar(rng), 0]) for _ in range(2))
        return Request(f"sadd {h32(a)} {h32(b)}", h32((a + b) % N))
    if op == "sred":
        x = rng.choice([rng.getrandbits(256), N, N + rng.getrandbits(128), 2**256 - 1, N - 1])
        return Request(f"sred {h32(x)}", h32(x % N))
    k = rng.choice([scalar(rng), rng.randrange(N)])
    return Request(f"glv {h32(k)}", glv_check(k))


def hash_request(rng: random.Random) -> Request:
    op = rng.choice(["sha", "tag", "h160", "isx", "isx"])
    msg = message(rng)
    if op == "sha":
        want = hashlib.sha256(msg).hexdigest()
        return Request(f"sha {hex_or_dash(msg)}", f"{want} {want}")
    if op == "tag":
        tag = rng.randrange(3)
        want = tagged(TAGS[tag], msg).hex()
        return Request(f"tag {tag} {hex_or_dash(msg)}", f"{want} {want}")
    if op == "h160":
        msg = rng.randbytes(33) if rng.random() < 0.5 else msg
        want = ripemd160(hashlib.sha256(msg).digest()).hex()
        return Request(f"h160 {hex_or_dash(msg)}", f"{want} {want}")
    x = rng.choice([rng.getrandbits(256), P - rng.randrange(3000), P + rng.randrange(2**32 + 977), rng.randrange(2**16)])
    try:
        valid = PublicKey(b"\x02" + x.to_bytes(32, "big")) is not None
    except ValueError:  # x >= p, or no point has it
        valid = False
    return Request(f"isx {h32(x)}", "1" if valid else "0")


def parse_request(rng: random.Random, near_p: list[PublicKey]) -> Request:
    width = rng.choice([33, 64])
    tokens, answers = [], []
    for _ in range(rng.randint(1, 20)):
        pt = point(rng, near_p)
        prefix, x, y = pt.format()[:1], pt.format()[1:], pt.format(compressed=False)[33:]
        kind = rng.choice(["valid", "valid", "valid", "x>=p", "off-curve", "prefix" if width == 33 else "y>=p"])
        if kind == "valid":
            tokens.append(encode(pt, width))
            answers.append(xy(pt))
            continue
        if kind == "x>=p":
            x = (P + rng.randrange(2**32 + 977)).to_bytes(32, "big")
        elif kind == "off-curve" and width == 33:
            x = off_curve_x(rng)
        elif kind == "off-curve":
            y = ((int.from_bytes(y, "big") + 1) % P).to_bytes(32, "big")
        elif kind == "y>=p":
            y = (P + rng.randrange(2**32 + 977)).to_bytes(32, "big")
        else:
            prefix = bytes([rng.choice([0, 1, 4, 5, 6, 7])])
        tokens.append((prefix + x).hex() if width == 33 else (x + y).hex())
        answers.append("-")
    return Request(f"parse {width} {' '.join(tokens)}", " ".join(answers))


def ecdh_request(rng: random.Random, near_p: list[PublicKey]) -> Request:
    """One scan key, a batch of tweak points of one width: b·T (as a light client's scan)."""
    b, width = scalar(rng), rng.choice([33, 64])
    pts = [point(rng, near_p) for _ in range(batch_size(rng))]
    want = " ".join(ser(times(t, b)) for t in pts)
    return Request(f"ecdh {h32(b)} {' '.join(encode(t, width) for t in pts)}", want)


def ecdhs_request(rng: random.Random, near_p: list[PublicKey]) -> Request:
    """(b·s_i)·A_i with per-lane scalars (a block scan's input_hash); some s_i out of range."""
    b = scalar(rng)
    pts = [point(rng, near_p) for _ in range(batch_size(rng))]
    ss = [rng.choice(BAD_SCALARS) if rng.random() < 0.05 else scalar(rng) for _ in pts]
    want = " ".join("-" if not 0 < s < N else ser(times(t, b * s % N)) for t, s in zip(pts, ss))
    return Request(f"ecdhs {h32(b)} {' '.join(t.format().hex() for t in pts)} {' '.join(map(h32, ss))}", want)


def tweak_request(rng: random.Random, near_p: list[PublicKey]) -> Request:
    """input_hash·A per tx, with its uncompressed form (the index's rows)."""
    pts = [point(rng, near_p) for _ in range(batch_size(rng))]
    hs = [rng.choice(BAD_SCALARS) if rng.random() < 0.05 else scalar(rng) for _ in pts]
    want = " ".join(ser_xy(times(a, h)) for a, h in zip(pts, hs))
    return Request(f"tweak {' '.join(a.format().hex() for a in pts)} {' '.join(map(h32, hs))}", want)


def spend_request(rng: random.Random, near_p: list[PublicKey]) -> Request:
    """B + t_i·G for a batch of t_i, some out of range and one (sometimes) with B + t·G at infinity."""
    b = scalar(rng)
    spend = PublicKey.from_secret(b.to_bytes(32, "big"))
    ts = [scalar(rng) for _ in range(batch_size(rng))]
    for i in range(len(ts)):
        r = rng.random()
        ts[i] = rng.choice(BAD_SCALARS) if r < 0.04 else N - b if r < 0.06 else ts[i]
    want = " ".join(ser_xy(add(spend, PublicKey.from_secret(t.to_bytes(32, "big"))) if 0 < t < N else None) for t in ts)
    return Request(f"spend {spend.format().hex()} {' '.join(map(h32, ts))}", want)


def lsum_request(rng: random.Random, near_p: list[PublicKey]) -> Request:
    """P_i + L_m for every pair; some L_m equal to a P_i (a doubling) or to −P_i (infinity)."""
    ps = [point(rng, near_p) for _ in range(rng.randint(1, 40))]
    ls = [point(rng, near_p) for _ in range(rng.randint(1, 12))]
    for m in range(len(ls)):
        r = rng.random()
        if r < 0.1:
            ls[m] = rng.choice(ps)
        elif r < 0.2:
            pick = rng.choice(ps).format()
            ls[m] = PublicKey(bytes([pick[0] ^ 1]) + pick[1:])
    want = " ".join(ser(add(p, l)) for p in ps for l in ls)
    return Request(f"lsum {len(ps)} {' '.join(p.format().hex() for p in ps)} {' '.join(l.format().hex() for l in ls)}", want)


def fe_request(rng: random.Random, raw_bits: int, raw_limbs: int) -> Request:
    op = rng.choice(list(FE_OPS))
    top = raw_bits * raw_limbs
    values = [[], []]
    for _ in range(rng.randint(1, 20)):
        for side in (0, 1):
            bounded = (op == "sub" and side == 1) or (op == "neg" and side == 0)  # the subtracted input: < 2^256
            limit = 2**256 if bounded else 2**top
            values[side].append(rng.choice([rng.randrange(limit), limit - 1, P, P - 1, 0, P + 1, 2 * P % limit]))
    mask = 2**raw_bits - 1
    raw = lambda v: "".join(((v >> (raw_bits * j)) & mask).to_bytes(8, "big").hex() for j in range(raw_limbs))  # noqa: E731
    results = []
    for a, b in zip(*values):
        r = {"mul": a * b, "sqr": a * a, "inv": pow(a, P - 2, P), "sqrt": pow(a, (P + 1) // 4, P), "add": a + b,
             "sub": a - b, "neg": -a, "mul21": 21 * a}[op]
        results.append(h32(r % P))
    tokens = [raw(v) for v in values[0]] + [raw(v) for v in values[1]]
    return Request(f"fe {FE_OPS[op]} {' '.join(tokens)}", " ".join(results))


def batch_size(rng: random.Random) -> int:
    return rng.choice([1, 2, 7, 8, 9, rng.randint(1, 20), rng.randint(60, 70), rng.randint(1, 150)])


def requests(rng: random.Random, n: int, raw: tuple[int, int]) -> list[Request]:
    """n requests, every other one to the engine core; raw = its field tests' (bits, limbs)."""
    near_p = points_near_p(40)
    portable = [scalar_request, hash_request]
    core = [
        lambda r: parse_request(r, near_p), lambda r: ecdh_request(r, near_p), lambda r: ecdhs_request(r, near_p),
        lambda r: tweak_request(r, near_p), lambda r: spend_request(r, near_p), lambda r: lsum_request(r, near_p),
        lambda r: fe_request(r, *raw),
    ]
    return [rng.choice(core if i % 2 else portable)(rng) for i in range(n)]


def compare(reqs: list[Request], answers: list[str]) -> list[str]:
    """The differences, as lines naming the request; [] when every answer is right."""
    bad = []
    if len(answers) != len(reqs):
        bad.append(f"{len(reqs)} requests but {len(answers)} answers")
    for i, (req, got) in enumerate(zip(reqs, answers)):
        ok = req.want(got) if callable(req.want) else got == req.want
        if not ok:
            want = "(a valid recoding)" if callable(req.want) else req.want
            bad.append(f"request {i + 1}: {req.line[:200]}\n  want {want[:400]}\n  got  {got[:400]}")
    return bad


def check_info(target: str, info: str) -> tuple[int, int]:
    """Check the driver's first line (what was built and which SHA256 path runs); returns (raw_bits, raw_limbs)."""
    words = info.split()
    if words[:2] != ["info", "sha"] or len(words) != 8:
        raise RuntimeError(f"unexpected first line: {info!r}")
    if target == "aarch64" and words[2] != "armv8":
        raise RuntimeError(f"the ARMv8 SHA2 path did not run under qemu ({words[2]})")
    if words[4] != "scalar":
        raise RuntimeError(f"expected the scalar engine core, the driver runs {words[4]!r}")
    return int(words[6]), int(words[7])


def differential(n: int, seed: int, target: str, work: Path) -> list[str]:
    """Build, generate n requests, run, compare; returns the differences (and prints the timings)."""
    start = time.perf_counter()
    exe = build(target, work)
    built = time.perf_counter()
    probe = work / "probe.txt"
    probe.write_text("")
    raw = check_info(target, run(target, exe, probe)[0])
    reqs = requests(random.Random(seed), n, raw)
    request_file = work / "requests.txt"
    request_file.write_text("".join(r.line + "\n" for r in reqs))
    generated = time.perf_counter()
    out = run(target, exe, request_file)
    (work / "answers.txt").write_text("\n".join(out) + "\n")
    ran = time.perf_counter()
    print(f"{target}: {n:,} requests, seed {seed}: build {built - start:.1f} s, "
          f"generate {generated - built:.1f} s, run {ran - generated:.1f} s", flush=True)
    return compare(reqs, out[1:])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", nargs="?", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--native", action="store_true", help="build for this machine and run without qemu")
    ap.add_argument("--keep", type=Path, default=None, help="directory for the build, requests and answers")
    args = ap.parse_args(argv)
    target = "native" if args.native else "aarch64"
    if missing := missing_tools(target):
        print(f"missing {', '.join(missing)}: apt-get install {PACKAGES}", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else int(time.time())
    work = args.keep or Path(tempfile.mkdtemp(prefix="sp-scan-arm64-"))
    work.mkdir(parents=True, exist_ok=True)
    bad = differential(args.n, seed, target, work)
    if bad:
        print(f"{len(bad)} difference(s); requests and answers in {work}", file=sys.stderr)
        print("\n".join(bad[:10]), file=sys.stderr)
        return 1
    if args.keep is None:
        shutil.rmtree(work)
    print("0 differences")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
