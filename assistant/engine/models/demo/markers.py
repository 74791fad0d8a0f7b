"""The markers a question may carry to make the demo's agents end otherwise (the demo's own, said in its answer).

``#demo-rounds=N`` gives each agent a round budget of N (with 2 or less it is interrupted by its budget at
its forced landing); ``#demo-fail`` makes each agent's model call fail as an unreachable provider would.
"""

from __future__ import annotations

import re

DEMO_ROUNDS = re.compile(r"#demo-rounds=(\d+)")
DEMO_FAIL = "#demo-fail"


def without_markers(text: str) -> str:
    return DEMO_ROUNDS.sub("", text).replace(DEMO_FAIL, "")
