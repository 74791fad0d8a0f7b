from django.apps import apps
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic.base import RedirectView

from assistant.api.api import api
from assistant.chat.theme import set_theme
from assistant.orgs.signin import PasswordResetConfirmView, PasswordResetView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("password-reset/", PasswordResetView.as_view(), name="password_reset"),
    path("password-reset/sent", auth_views.PasswordResetDoneView.as_view(), name="password_reset_done"),
    path("password-reset/<uidb64>/<token>/", PasswordResetConfirmView.as_view(), name="password_reset_confirm"),
    path("password-reset/done", auth_views.PasswordResetCompleteView.as_view(), name="password_reset_complete"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("theme", set_theme, name="set_theme"),
    # Pages that name no icon (the API's docs, Django's admin) make the browser ask for this one.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("v1/", api.urls),
    path("kb/", include("assistant.knowledge.urls")),
    path("settings/", include("assistant.orgs.urls")),
    path("settings/", include("assistant.connectors.urls")),
    path("tasks/", include("assistant.schedules.urls")),
    path("settings/", include("assistant.budgets.urls")),
    path("", include("assistant.chat.urls")),
    # The offline demo's pages, when its app is installed (nothing else names it).
    *([path("", include("assistant.demo.urls"))] if apps.is_installed("assistant.demo") else []),
]
