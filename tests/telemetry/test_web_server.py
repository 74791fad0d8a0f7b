"""The web server as deployed (daphne through ``manage.py runserver``) with ``OTEL_EXPORTER_OTLP_ENDPOINT``: a run
through the API reaches an OTLP/HTTP receiver this test starts, flushed when SIGTERM stops the server."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest

from tests.live_server import start_server
from tests.otlp_receiver import metric_names, receiving, spans_of
from tests.telemetry.telemetry_support import DELEGATING, QUESTION

pytestmark = pytest.mark.slow

SERVER = """
import json, sys
import django
django.setup()
from django.core.management import call_command
from assistant.orgs import keys
from assistant.orgs.models import Organisation
call_command("migrate", verbosity=0)
call_command("load_demo", verbosity=0)
with open(sys.argv[2], "w") as f:
    json.dump(keys.create_key(Organisation.objects.get(slug="demo"), "traced")[1], f)
call_command("runserver", sys.argv[1], use_reloader=False)
"""


def test_the_web_server_exports_a_run_and_flushes_it_on_sigterm(tmp_path: Path) -> None:
    with receiving() as receiver:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
            "OTEL_SERVICE_NAME": "assistant-web",
            "OTEL_BSP_SCHEDULE_DELAY": "600000",  # nothing leaves before SIGTERM
            "OTEL_METRIC_EXPORT_INTERVAL": "600000",
        }
        key_path = tmp_path / "key.json"
        with start_server(SERVER, tmp_path, str(key_path), pace="0", latency="0", env=env) as server:
            server.wait_until_up(timeout=180)  # migrating on a loaded machine takes a while
            secret = json.loads(key_path.read_text())
            asked = {
                "model": "demo-large",
                "messages": [{"role": "user", "content": QUESTION}],
                "tools_enabled": DELEGATING,
            }
            response = httpx2.post(
                f"{server.url}/v1/chat/completions",
                headers={"Authorization": f"Bearer {secret}"},
                json=asked,
                timeout=60,
            )
            assert response.status_code == 200 and response.json()["status"] == "ok"
            assert "/v1/traces" not in receiver.received
            server.process.terminate()  # SIGTERM
            assert server.process.wait(timeout=30) is not None
        found = spans_of(receiver)
        log = server.log_path.read_text()
        assert {service for service, _ in found} == {"assistant-web"}, log[-3000:]
        names = [span.name for _, span in found]
        assert names.count("invoke_agent assistant") == 1 and names.count("execute_tool agents") == 1, names
        assert len({span.trace_id for _, span in found}) == 1
        assert {"gen_ai.client.token.usage", "assistant.runs"} <= metric_names(receiver)
