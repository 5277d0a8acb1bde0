from django.contrib import admin
from django.urls import path
from django.views.generic import RedirectView

urlpatterns = [
    path("admin/", admin.site.urls),
    # Until the run browser exists, the admin is the only page there is.
    path("", RedirectView.as_view(pattern_name="admin:index", permanent=False)),
]
