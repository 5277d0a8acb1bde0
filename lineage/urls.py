"""The skill library's routes (mounted under /api/skills/ by optiml_web/urls.py).
`<card:...>` takes only card ids (optiml_web.params): anything else is a 404."""

from django.urls import path

from lineage import apis
from optiml_web import params

params.register_converters()

urlpatterns = [
    path("", apis.SkillLibraryApi.as_view(), name="api-skills"),
    path("libraries/", apis.SkillLibrariesApi.as_view(), name="api-skills-libraries"),
    path("copy/", apis.SkillLibraryCopyApi.as_view(), name="api-skills-copy"),
    path("export/", apis.SkillLibraryExportApi.as_view(), name="api-skills-export"),
    path("import/", apis.SkillLibraryImportApi.as_view(), name="api-skills-import"),
    path("<card:card_id>/", apis.SkillCardApi.as_view(), name="api-skill"),
    path("<card:card_id>/review/", apis.SkillReviewApi.as_view(), name="api-skill-review"),
    path("<card:card_id>/comments/", apis.SkillCommentsApi.as_view(), name="api-skill-comments"),
    path("<card:card_id>/versions/", apis.SkillVersionsApi.as_view(), name="api-skill-versions"),
    path("<card:card_id>/usage/", apis.SkillUsageApi.as_view(), name="api-skill-usage"),
    path("<card:card_id>/effects/", apis.SkillEffectsApi.as_view(), name="api-skill-effects"),
]

# Mounted under /api/lineages/.
lineage_patterns = [
    path("", apis.LineageListApi.as_view(), name="api-lineages"),
    path("<id:lineage_id>/", apis.LineageGraphApi.as_view(), name="api-lineage"),
]
