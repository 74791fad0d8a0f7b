from django.urls import path

from . import views

urlpatterns = [
    path("demo-web/", views.demo_web_page, name="demo_web_page"),
]
