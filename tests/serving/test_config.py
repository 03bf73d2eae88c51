"""Model blocks: a kernel form that no longer exists is refused, naming the forms that do."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from serving.config import KERNEL_FORMS, model_config


@pytest.mark.parametrize("gone", ["dense", "flex", "naive"])
def test_a_removed_kernel_form_is_refused_naming_the_allowed_ones(gone):
    with pytest.raises(ValidationError) as e:
        model_config(backend="hf", model="tiny-llama", kernel=gone)
    (err,) = e.value.errors()
    assert err["loc"][-1] == "kernel" and repr(gone) in str(e.value)
    assert all(repr(form) in err["msg"] for form in KERNEL_FORMS), err["msg"]
