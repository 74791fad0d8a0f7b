"""A run's messages handed at once to the listeners in this process, without the channel layer's hops.

The recorder publishes each event to the run's group (``groups.run_group``) through the channel layer, which
reaches every process. A listener in the process that executes the run (a live page's consumer, with the
embedded executor) gets the same message here first, in the publisher's own call: Channels' delivery takes
several turns of the event loop (a task per member, then the consumer's dispatch), and with many runs
streaming on one loop each turn is long, so those turns were most of the delay between a token and the page.

A listener registers a plain function (``listen``): it must not block, and it receives every message the run
publishes in this process from then on (``run.event``, then ``run.finished``), in order. Where the channel
layer is this process's own (``in_process``: the in-memory layer, where every run executes here), that is all
it needs; with a shared layer (Redis) it also joins the group, for runs executed elsewhere, and gets this
process's messages twice: a follower (``follow.Follower``) skips what it has.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from channels.layers import InMemoryChannelLayer, get_channel_layer

from .messages import RunMessage

log = logging.getLogger(__name__)

Listener = Callable[[RunMessage], None]

# This process's listeners by run: the recorder that publishes and the page or response that listens meet here only,
# by the run's id (as in the channel layer's groups), never handing each other anything.
_listeners: dict[str, list[Listener]] = {}


def listen(run_hex: str, listener: Listener) -> None:
    """``listener`` gets each message the run publishes in this process from now on."""
    _listeners.setdefault(run_hex, []).append(listener)


def unlisten(run_hex: str, listener: Listener) -> None:
    listeners = _listeners.get(run_hex)
    if listeners is None:
        return
    if listener in listeners:
        listeners.remove(listener)
    if not listeners:
        del _listeners[run_hex]


def deliver(run_hex: str, message: RunMessage) -> None:
    """Hand ``message`` to the run's listeners in this process, each in turn; one that fails does not stop the rest."""
    for listener in tuple(_listeners.get(run_hex, ())):
        try:
            listener(message)
        except Exception:
            log.exception("a listener of run %s failed on a %s message", run_hex, message["type"])


def in_process() -> bool:
    """Whether the channel layer is this process's own: then every run that can be followed from here executes
    here, and its listeners need nothing but ``listen``."""
    return isinstance(get_channel_layer(), InMemoryChannelLayer)
