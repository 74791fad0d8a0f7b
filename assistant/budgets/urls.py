from django.urls import path

from . import views

urlpatterns = [
    path("budgets/", views.budgets_page, name="budgets"),
    path("budgets/categories", views.save_categories, name="budget_categories"),
    path("budgets/categories/new", views.new_category, name="budget_category_new"),
    path("budgets/raises", views.add_raise, name="budget_raise"),
    path("budgets/time-zone", views.save_time_zone, name="budget_time_zone"),
    path("budgets/forced-landings", views.save_landing_watch, name="budget_landing_watch"),
    path("usage/", views.usage_page, name="usage"),
    path("usage.csv", views.usage_export, name="usage_csv"),
    path("usage/spend.csv", views.usage_spend_export, name="usage_spend_csv"),
    path("usage/mine/", views.my_usage, name="my_usage"),
    path("usage/alerts/<int:pk>/seen", views.alert_seen, name="budget_alert_seen"),
    path("usage/landing-alerts/<int:pk>/seen", views.landing_alert_seen, name="landing_alert_seen"),
]
