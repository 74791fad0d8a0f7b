from django.apps import AppConfig


class BudgetsConfig(AppConfig):
    name = "assistant.budgets"
    verbose_name = "Budgets per task category"

    def ready(self) -> None:
        # Runs are admitted and charged through the category budgets (``runs`` does not import this app).
        from assistant.runs import accounting

        from .ledger import CategoryAccounting

        accounting.register(CategoryAccounting())
