"""The projector pays its first-use costs before it reports ready (issue 20)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
from schemas import tokens
from services.projector.decoding import warm_up
before = tokens.encoding.cache_info().currsize
spent = warm_up()
print(before, tokens.encoding.cache_info().currsize, spent)
"""


def test_the_warm_up_loads_the_tokenizer_in_a_fresh_process() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    before, after, spent = out.stdout.split()
    assert (before, after) == ("0", "1")  # nothing had loaded it; the warm-up did
    assert float(spent) > 0


def test_the_projector_warms_up_before_its_loop() -> None:
    import inspect

    from services.projector import main

    source = inspect.getsource(main.run)
    assert source.index("warm_up()") < source.index("Projector(config, metrics).run(stop)")
