from django.apps import AppConfig


class BudgetsConfig(AppConfig):
    name = "assistant.budgets"
    verbose_name = "Budgets per task category"

    def ready(self) -> None:
        # Runs are admitted and charged through the category budgets (``runs`` does not import this app).
        from assistant.runs import accounting

        from .ledger import CategoryAccounting

        accounting.register(CategoryAccounting())

        # When a run with agents ends, its month's forced-landing shares are checked against the threshold.
        from assistant.runs.ends import run_ended

        from .landings import on_run_ended

        run_ended.connect(on_run_ended, dispatch_uid="budgets.landings.on_run_ended")
