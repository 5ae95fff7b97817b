"""services.runtime.loading: the one reader of a JSON object, whoever holds it (a setting, a file, an answer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.runtime.errors import UserFacingError
from services.runtime.loading import json_object, json_object_file


class Refused(Exception):
    pass


@pytest.mark.parametrize(
    ("text", "why"),
    [("{nope", "Expecting property name"), ("[1, 2]", "got list"), ("3", "got int"), ("", "Expecting value")],
)
def test_anything_but_a_json_object_raises_the_callers_error_saying_why(text: str, why: str) -> None:
    with pytest.raises(Refused, match=why):
        json_object(text, Refused)
    assert json_object(' {"a": [1]} ', Refused) == {"a": [1]}


def test_a_config_file_is_read_once_and_every_problem_is_one_user_facing_line(tmp_path: Path) -> None:
    assert json_object_file(None) == {} == json_object_file("")
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text('{"backend": "http"}')
    bad.write_text('["backend"]')
    assert json_object_file(str(good)) == {"backend": "http"}
    for path, needle in (
        (bad, "is not a JSON object: got list"),
        (tmp_path / "none.json", "cannot read config"),
    ):
        with pytest.raises(UserFacingError, match=needle) as caught:
            json_object_file(str(path))
        assert str(path) in str(caught.value) and "\n" not in str(caught.value)
