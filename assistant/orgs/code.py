"""What the settings page says of ``run_code``: whether it is offered, with which sandbox layers, or which is missing."""

from __future__ import annotations

from django.conf import settings
from django.utils.translation import gettext as _

from assistant.engine.sandbox_probe import detect


def code_status() -> dict[str, object]:
    """For the settings page: whether run_code is enabled and offered, its layers, and what is missing."""
    if not settings.RUN_CODE_ENABLED:
        return {"enabled": False, "offered": False, "layers": [], "missing": []}
    isolation = detect()
    if isolation is None:
        return {"enabled": True, "offered": False, "layers": [], "missing": [_("a Linux host with Python")]}
    layers = [
        _("a separate process with CPU, memory and file limits, Landlock where the kernel has it, an audit hook"),
        *(
            [_("bubblewrap: new user, mount, pid and network namespaces; a minimal read-only root")]
            if isolation.bwrap
            else []
        ),
        *(
            [_("a seccomp allow-list of system calls: no sockets, processes or namespaces")]
            if isolation.seccomp
            else []
        ),
        _("a user of its own per run")
        if isolation.uids
        else _("the server's own user (the server does not run as root)"),
    ]
    return {"enabled": True, "offered": isolation.complete, "layers": layers, "missing": list(isolation.missing)}
