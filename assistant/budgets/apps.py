from django.apps import AppConfig
from django.db.models.signals import post_save


class BudgetsConfig(AppConfig):
    name = "assistant.budgets"
    verbose_name = "Budgets per task category"

    def ready(self) -> None:
        # Runs are admitted and charged through the category budgets (``runs`` does not import this app).
        from assistant.runs import accounting

        from .ledger import CategoryAccounting

        accounting.register(CategoryAccounting())

        # When a run with agents ends, its month's forced-landing shares are checked against the threshold.
        from assistant.runs.models import Run

        from .landings import on_run_saved

        post_save.connect(on_run_saved, sender=Run, dispatch_uid="budgets.landings.on_run_saved")
