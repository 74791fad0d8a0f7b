from django.apps import AppConfig


class BudgetsConfig(AppConfig):
    name = "assistant.budgets"
    verbose_name = "Budgets per task category"
