"""The ARM64 C differential's harness (tests/arm64/): its driver, built for this machine, answers like
libsecp256k1 and Python integers, and its comparison flags a wrong, missing or malformed answer.

The cross-compiled run under qemu-aarch64 is `.ci/run`'s step (`python -m tests.arm64.differential`).
"""

from __future__ import annotations

import random

from arm64 import differential as diff


def test_the_driver_built_for_this_machine_answers_like_libsecp256k1(tmp_path):
    assert diff.differential(300, 352, "native", tmp_path) == []


def test_a_wrong_or_missing_answer_is_reported_with_its_request():
    reqs = [r for r in diff.requests(random.Random(7), 400, (52, 5)) if isinstance(r.want, str)]
    answers = [r.want for r in reqs]
    assert diff.compare(reqs, answers) == []
    wrong = answers.copy()
    wrong[5] = wrong[5][:-1] + ("0" if wrong[5][-1] != "0" else "1")
    (only,) = diff.compare(reqs, wrong)
    assert only.startswith(f"request 6: {reqs[5].line[:50]}")
    assert diff.compare(reqs, answers[:-1]) == [f"{len(reqs)} requests but {len(reqs) - 1} answers"]


def test_a_glv_recoding_must_add_up_to_k_with_digits_in_range():
    digits = lambda *ds: bytes(d % 256 for d in (*ds, *[0] * (26 - len(ds)))).hex()  # noqa: E731
    check = diff.glv_check(49 + 3 * diff.LAMBDA)
    assert check(f"00 {digits(-15, 2)} {digits(3)}")  # 49 = −15 + 2·32
    assert not check(f"00 {digits(17, 1)} {digits(3)}")  # the right sum, but 17 is out of [−15, 16]
    assert not check(f"00 {digits(-15, 2)} {digits(4)}")
    assert not check(f"10 {digits(-15, 2)} {digits(3)}")  # −49 + 3λ
    assert not check(f"00 {digits(-15, 2)}")
    assert diff.glv_check(diff.N - 49 + 3 * diff.LAMBDA)(f"10 {digits(-15, 2)} {digits(3)}")
