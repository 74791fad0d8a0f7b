from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic.base import RedirectView

from assistant.api.api import api
from assistant.chat.theme import set_theme

urlpatterns = [
    path("admin/", admin.site.urls),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("i18n/", include("django.conf.urls.i18n")),
    path("theme", set_theme, name="set_theme"),
    # Pages that name no icon (the API's docs, Django's admin) make the browser ask for this one.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("v1/", api.urls),
    path("kb/", include("assistant.knowledge.urls")),
    path("settings/", include("assistant.orgs.urls")),
    path("tasks/", include("assistant.schedules.urls")),
    path("settings/", include("assistant.budgets.urls")),
    path("", include("assistant.chat.urls")),
]
