"""The markers a question may carry to make the demo's agents end otherwise (the demo's own, said in its answer).

``#demo-rounds=N`` gives each agent a round budget of N (with 2 or less it is interrupted by its budget at
its forced landing); ``#demo-fail`` makes each agent's model call fail as an unreachable provider would;
``#demo-hang=S`` makes each agent's model calls after its first round hang S seconds before answering, as a
provider that does not answer (Stop aborts them); ``#demo-slow=query``, ``=code`` or ``=connector`` makes the main
model's first round call a tool that takes long (a query over a cross join, a script that sleeps, the first
connector tool offered, on a connector that is slow itself): what Stop must end.
"""

from __future__ import annotations

import re

DEMO_ROUNDS = re.compile(r"#demo-rounds=(\d+)")
DEMO_FAIL = "#demo-fail"
DEMO_HANG = re.compile(r"#demo-hang=(\d+(?:\.\d+)?)")
DEMO_SLOW = re.compile(r"#demo-slow=(query|code|connector)")


def without_markers(text: str) -> str:
    return DEMO_SLOW.sub("", DEMO_HANG.sub("", DEMO_ROUNDS.sub("", text))).replace(DEMO_FAIL, "")
