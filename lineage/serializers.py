"""The skill library's API shapes (lineage/apis.py). A card's stored data quotes gate
messages (its trials, its risks): every seed in them is hidden before it leaves."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from accounts.fields import DisplayTextField
from lineage.models import SkillCard, SkillComment, SkillReview
from lineage.selectors import SKILL_SORTS
from optiml_web.params import TextChoiceField, TextField, TextRegexField, WholeNumberField
from profiling.serialization import data_for_users


class SkillLibraryQuerySerializer(serializers.Serializer):
    intent = TextField(required=False, allow_blank=True, max_length=60)
    task = TextField(required=False, allow_blank=True, max_length=100)
    arch = TextField(required=False, allow_blank=True, max_length=20)
    status = TextChoiceField(choices=SkillCard.Status.choices, required=False, allow_blank=True)
    sort = TextChoiceField(choices=SKILL_SORTS, required=False, default="intent")


class SkillCardRowSerializer(serializers.Serializer):
    """A row of the library: the intent, the measured effect range, how many lineages and
    steps are behind it, its status; a skeleton card (lineage/engine/skeleton_cards.py)
    also names its skeleton and family."""

    card_id = serializers.CharField()
    intent = serializers.CharField()
    status = serializers.CharField()
    kind = serializers.SerializerMethodField(help_text="token (a card's patterns and steps) or skeleton")
    skeleton = serializers.SerializerMethodField(help_text="the schedule a skeleton card emits, else null")
    family = serializers.SerializerMethodField(help_text="the family a skeleton card's schedule is for")
    sentence = serializers.SerializerMethodField()
    effect = serializers.SerializerMethodField()
    lineages = serializers.SerializerMethodField()
    steps = serializers.SerializerMethodField()
    runs = serializers.IntegerField(source="run_count", default=0,
                                    help_text="the runs you may see where it made a node")
    arch = serializers.SerializerMethodField()
    tasks = serializers.SerializerMethodField()
    reviews = serializers.IntegerField(source="review_count", default=0)
    comments = serializers.IntegerField(source="comment_count", default=0)
    updated_at = serializers.DateTimeField()

    def get_sentence(self, card: SkillCard) -> str:
        return card.data.get("sentence", "")

    def get_kind(self, card: SkillCard) -> str:
        return "skeleton" if card.data.get("kind") == "skeleton" else "token"

    def get_skeleton(self, card: SkillCard) -> str | None:
        return card.data.get("skeleton") if card.data.get("kind") == "skeleton" else None

    def get_family(self, card: SkillCard) -> str | None:
        return card.data.get("family") if card.data.get("kind") == "skeleton" else None

    def get_effect(self, card: SkillCard) -> dict[str, Any]:
        """The measured speed-ups: how many, the lowest, the median, the highest."""
        return card.data["effects"]["speedup"]

    def get_lineages(self, card: SkillCard) -> int:
        return card.data["evidence"]["lineages"]

    def get_steps(self, card: SkillCard) -> int:
        return card.data["evidence"]["transitions"]

    def get_arch(self, card: SkillCard) -> str:
        return card.data.get("scope", {}).get("arch", "")

    def get_tasks(self, card: SkillCard) -> list[str]:
        return card.data.get("scope", {}).get("tasks", [])


class SkillReviewSerializer(serializers.ModelSerializer):
    reviewer = serializers.CharField(source="reviewer.username")

    class Meta:
        model = SkillReview
        fields = ["id", "reviewer", "decision", "comment", "status_before", "status_after", "created_at"]


class SkillCommentSerializer(serializers.ModelSerializer):
    author = serializers.CharField(source="author.username")

    class Meta:
        model = SkillComment
        fields = ["id", "author", "text", "created_at"]


class SkillCardSerializer(SkillCardRowSerializer):
    """A card whole: its stored data (intent, anchor, vector, preconditions, effects,
    risks, scope, evidence, roundtrip), its reviews and its comments."""

    card = serializers.SerializerMethodField()
    library = serializers.SerializerMethodField()
    anchor_code = serializers.SerializerMethodField()
    revision = serializers.IntegerField()
    can_review = serializers.SerializerMethodField()
    lineages_behind = serializers.SerializerMethodField()
    review_history = SkillReviewSerializer(source="reviews", many=True)
    comment_thread = SkillCommentSerializer(source="comments", many=True)

    def get_lineages_behind(self, card: SkillCard) -> list[dict[str, Any]]:
        """The stored lineages the card was induced from, each with its page."""
        return [{"id": lineage.pk, "task": lineage.task.name, "page": f"/lineages/{lineage.pk}/"}
                for lineage in card.lineages.select_related("task").order_by("task__name", "pk")]

    def get_can_review(self, card: SkillCard) -> bool:
        """Whether the one asking may approve, reject and edit it (the page offers it)."""
        from lineage.services import skill_card_can_review

        request = self.context.get("request")
        return skill_card_can_review(user=request.user, team=card.team) if request else False

    def get_anchor_code(self, card: SkillCard) -> list[dict[str, Any]]:
        """Where its steps act, in each lineage's own code (selectors.skill_card_anchor_code)."""
        from lineage.selectors import skill_card_anchor_code

        return skill_card_anchor_code(card=card)

    def get_library(self, card: SkillCard) -> dict[str, Any]:
        """The library it is in (team None: the project's default one), and the default
        card it was copied from, if it was."""
        return {"team": card.team_id, "name": card.team.name if card.team_id else "Default library",
                "copied_from": card.copied_from.card_id if card.copied_from_id else None}

    def get_card(self, card: SkillCard) -> dict[str, Any]:
        return data_for_users(card_for_people(card.data))


# The machine's parts of an anchor (syntax trees, token edits, sites): megabytes per card
# that a person reads through the before/after texts and the vector's diffs instead.
_MACHINE_KEYS = {"tree", "edits", "general_edits", "sites", "general_sites", "concrete_tokens",
                 "bindings", "examples"}


def card_for_people(data: dict[str, Any]) -> dict[str, Any]:
    """A card's data without the machine's parts of its anchor; the rest as stored."""
    anchor = data.get("anchor", {})
    lean = {key: value for key, value in anchor.items() if key not in ("rewrites", "steps")}
    lean["rewrites"] = [{k: v for k, v in r.items() if k not in _MACHINE_KEYS}
                        for r in anchor.get("rewrites", [])]
    lean["steps"] = [{k: v for k, v in step.items() if k not in _MACHINE_KEYS}
                     for step in anchor.get("steps", [])]
    return {**{k: v for k, v in data.items() if k != "anchor"}, "anchor": lean}


class SkillLibraryChoiceSerializer(serializers.Serializer):
    team = serializers.IntegerField(allow_null=True)
    name = serializers.CharField()
    cards = serializers.IntegerField()
    role = serializers.CharField()


class SkillCopySerializer(serializers.Serializer):
    team = WholeNumberField(min_value=1, max_value=2**63 - 1)
    cards = serializers.ListField(child=TextRegexField(r"^[a-z0-9_]{1,90}-v[0-9]{1,6}$"),
                                  required=False, max_length=1000)


class SkillReviewCreateSerializer(serializers.Serializer):
    decision = TextChoiceField(choices=SkillReview.Decision.choices)
    comment = DisplayTextField(max_length=10_000, trim_whitespace=True)


class SkillCommentCreateSerializer(serializers.Serializer):
    text = DisplayTextField(max_length=10_000, trim_whitespace=True)


class SkillCardEditSerializer(serializers.Serializer):
    fields_at_least = 1  # the schema's minProperties (optiml_web.schema): validate() refuses {}
    sentence = DisplayTextField(required=False, max_length=500)
    notes = DisplayTextField(required=False, allow_blank=True, max_length=10_000)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            raise serializers.ValidationError("give the new sentence, the new notes, or both")
        return attrs


class SkillVersionSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    author = serializers.CharField(allow_null=True, help_text="null: the text induction wrote")
    created_at = serializers.DateTimeField()
    sentence = serializers.CharField()
    notes = serializers.CharField(allow_blank=True)
    diff = serializers.CharField(allow_blank=True, help_text="unified diff from the version before")


class SkillUsageSerializer(serializers.Serializer):
    run = serializers.IntegerField()
    task = serializers.CharField()
    intent = serializers.CharField(allow_blank=True)
    node = serializers.IntegerField()
    title = serializers.CharField()
    status = serializers.CharField(allow_blank=True, help_text="passed, rejected, error; blank while pending")
    guard = serializers.CharField(allow_blank=True)
    level = serializers.CharField(allow_blank=True)
    time_ms = serializers.FloatField(allow_null=True)
    parent_time_ms = serializers.FloatField(allow_null=True)
    card_version = serializers.JSONField(allow_null=True, help_text="the card as the run used it: "
                                         "{version, status, sha256}; null before runs recorded it")
    speedup_vs_parent = serializers.FloatField(allow_null=True)
    page = serializers.CharField()
    api = serializers.CharField()


class LineageRowSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    task = serializers.CharField()
    gpu = serializers.CharField(allow_blank=True)
    origin = serializers.CharField()
    complete = serializers.BooleanField()
    states = serializers.IntegerField()
    page = serializers.CharField()
