"""Each task of an ``agents`` call, once its arguments are valid, checked against the request and the policy: its model
(allowed, at least ``cheaper_factor`` times cheaper than the main model), its resources (a subset of the request's),
its profile, its chosen documents (read once for the whole call) and its first request's fit in its model's window."""

from __future__ import annotations

from dataclasses import dataclass

from .agent import context_refusal
from .catalogue import ModelInfo
from .delegation_arguments import TaskArguments
from .events import ChosenDocument
from .outcomes import AgentTask
from .policy import RESOURCE_KINDS, Plan, resource_kind
from .runtime import RunContext
from .scope import parse_document
from .tools import Document


@dataclass(frozen=True, slots=True)
class TaskChecks:
    """What one run's tasks are checked against: its context and plan, the models its agents may use (``models``)."""

    ctx: RunContext
    plan: Plan
    main_model: ModelInfo
    models: list[ModelInfo]

    @property
    def resources(self) -> tuple[str, ...]:
        """The request's resources: a task's are a subset of them."""
        return self.plan.scope.resources

    def check(self, args: TaskArguments, found: dict[str, Document]) -> AgentTask | str:
        """A valid task checked against the request and the policy, or the reason it is refused.

        ``found`` holds the documents the call's tasks name, as the knowledge backend read them.
        """
        policy, catalogue = self.ctx.policy, self.ctx.catalogue
        profile = policy.profiles.get(args.profile) if args.profile else None
        if args.profile and profile is None:
            return f"Unknown agent profile '{args.profile}'. Profiles: {', '.join(policy.profiles) or 'none'}."
        model_id = args.model or (profile.default_model if profile else "") or ""
        allowed = [m.id for m in self.models]
        if model_id not in allowed:
            if model_id in catalogue and not policy.allows(model_id):
                return (
                    f"The model '{model_id}' is not allowed in this organisation. Choose one of: {', '.join(allowed)}."
                )
            return f"The model '{model_id}' cannot run agents here (allowed models at least twice cheaper than {self.main_model.id}): choose one of {', '.join(allowed)}."
        resources = list(args.resources)
        documents = self._documents(args.documents, found)
        if isinstance(documents, str):
            return documents
        if not (resources or documents):
            return "The task needs resources: a non-empty subset of " + ", ".join(self.resources) + "."
        outside = [r for r in resources if r not in self.resources]
        if outside:
            return (
                f"Resource(s) {', '.join(outside)} are not part of this request and cannot be given to an agent. "
                f"Available: {', '.join(self.resources)}."
            )
        if documents:
            # Chosen documents are the agent's whole knowledge: no base, nor other document, besides them.
            resources = [r for r in resources if resource_kind(r) != "kb"] + [d.resource for d in documents]
        else:  # the request's own chosen documents, handed on as resources: their titles for the line
            documents = tuple(
                ChosenDocument(id=doc.id, kb=doc.kb, title=doc.title)
                for r in resources
                if (chosen := parse_document(r)) is not None
                and (doc := found.get(chosen[1])) is not None
                and doc.kb == chosen[0]
            )
        if profile is not None:
            barred = [r for r in resources if resource_kind(r) not in profile.tools]
            if barred:
                kinds = ", ".join(k for k in RESOURCE_KINDS if k in profile.tools) or "none"
                return (
                    f"The agent profile '{profile.name}' may only receive these kinds of resources: {kinds}; "
                    f"{', '.join(barred)} cannot be given to it."
                )
        task = AgentTask(
            instruction=args.instruction,
            model=catalogue[model_id],
            resources=tuple(dict.fromkeys(resources)),
            max_rounds=args.max_rounds,
            rounds_asked=args.rounds_asked,
            profile=profile,
            documents=documents,
        )
        return context_refusal(self.ctx, task, self.plan.level_effort) or task

    def _documents(self, ids: list[str], found: dict[str, Document]) -> tuple[ChosenDocument, ...] | str:
        """A task's chosen documents, each one of this request's, or the reason they are refused."""
        scope = self.plan.scope
        chosen: list[ChosenDocument] = []
        for doc_id in ids:
            doc = found.get(doc_id)
            if doc is None:
                return f"Document '{doc_id}' does not exist: use the ids kb_search returned."
            if not scope.may_read(doc.kb, doc.id):
                return (
                    f"Document '{doc_id}' is not part of this request's knowledge bases "
                    f"({', '.join(r for r in scope.resources if resource_kind(r) == 'kb') or 'none'}) "
                    "and cannot be given to an agent."
                )
            chosen.append(ChosenDocument(id=doc.id, kb=doc.kb, title=doc.title))
        return tuple(chosen)

    async def found(self, tasks: list[TaskArguments | str]) -> dict[str, Document]:
        """The documents the tasks name, read once for the whole call (none without a knowledge backend)."""
        ids: set[str] = set()
        for t in tasks:
            if isinstance(t, str):
                continue
            ids.update(t.documents)
            ids.update(chosen[1] for r in t.resources if (chosen := parse_document(r)) is not None)
        knowledge = self.ctx.toolbox.knowledge
        if not ids or knowledge is None:
            return {}
        return await knowledge.read(sorted(ids))
