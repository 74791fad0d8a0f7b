"""The metrics: the GenAI conventions' two histograms, and our own counters (``assistant.*``)."""

from __future__ import annotations

from dataclasses import dataclass

from opentelemetry.metrics import Counter, Histogram, Meter, UpDownCounter

# The buckets the GenAI conventions advise for these two histograms.
TOKEN_BUCKETS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]
DURATION_BUCKETS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
STOP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]


@dataclass(frozen=True, slots=True)
class Instruments:
    token_usage: Histogram
    operation_duration: Histogram
    runs: Counter
    agents: Counter
    forced_landings: Counter
    stops: Counter
    stop_duration: Histogram
    refusals: Counter
    connections: UpDownCounter

    @classmethod
    def create(cls, meter: Meter) -> Instruments:
        return cls(
            token_usage=meter.create_histogram(
                "gen_ai.client.token.usage",
                unit="{token}",
                description="Number of input and output tokens used, per model call",
                explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
            ),
            operation_duration=meter.create_histogram(
                "gen_ai.client.operation.duration",
                unit="s",
                description="Duration of each request sent to a model provider",
                explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
            ),
            runs=meter.create_counter("assistant.runs", unit="{run}", description="Runs ended, by status and reason"),
            agents=meter.create_counter(
                "assistant.agents", unit="{agent}", description="Agents ended, by status and reason"
            ),
            forced_landings=meter.create_counter(
                "assistant.agents.forced_landings",
                unit="{agent}",
                description="Agents whose last round was forced to return their report",
            ),
            stops=meter.create_counter("assistant.stops", unit="{run}", description="Runs stopped, by cause"),
            stop_duration=meter.create_histogram(
                "assistant.stop.duration",
                unit="s",
                description="From a run's Stop (or budget stop) to its end in the engine",
                explicit_bucket_boundaries_advisory=STOP_BUCKETS,
            ),
            refusals=meter.create_counter(
                "assistant.refusals",
                unit="{request}",
                description="Requests refused before they started, by code (the category budget's among them)",
            ),
            connections=meter.create_up_down_counter(
                "assistant.chat.connections",
                unit="{connection}",
                description="Open live chat connections (websockets)",
            ),
        )
