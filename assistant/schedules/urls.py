from django.urls import path

from . import views

urlpatterns = [
    path("", views.task_list, name="schedules"),
    path("new", views.task_edit, name="schedule_new"),
    path("<int:pk>/", views.task_edit, name="schedule"),
    path("<int:pk>/delete", views.task_delete, name="schedule_delete"),
    path("<int:pk>/run", views.task_run_now, name="schedule_run"),
]
