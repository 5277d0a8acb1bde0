"""The API's field for text people write that other people read (accounts.names): the
service's rule as the field's validator, and as the schema's pattern, so that a client's
validator and the server refuse the same text."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator

from accounts.names import DISPLAY_TEXT_NOT_BLANK_PATTERN, DISPLAY_TEXT_PATTERN, display_text_problem
from optiml_web.params import TextField


class DisplayTextValidator(RegexValidator):
    """A RegexValidator so that drf-spectacular documents its pattern; its check is
    accounts.names', which says which character is refused and why."""

    def __init__(self, *, allow_blank: bool) -> None:
        super().__init__(DISPLAY_TEXT_PATTERN if allow_blank else DISPLAY_TEXT_NOT_BLANK_PATTERN)

    def __call__(self, value) -> None:
        problem = display_text_problem(str(value))
        if problem:
            raise ValidationError(problem, code="invalid")


class DisplayTextField(TextField):
    """Text of one line or several that others will read: no control characters but line
    breaks and tabs, no text-direction embeddings, overrides or isolates."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.validators.append(DisplayTextValidator(allow_blank=self.allow_blank))
