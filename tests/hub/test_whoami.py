"""The genuine huggingface_hub client authenticates against a kforge hub (whoami-v2)."""

from __future__ import annotations

import pytest
from huggingface_hub import HfApi
from huggingface_hub.errors import HfHubHTTPError


def test_whoami_reports_user_and_orgs(kforge_hub):
    token = kforge_hub.token("alice", orgs=["acme"])
    assert token.startswith("hf_")
    info = HfApi(endpoint=kforge_hub.url, token=token).whoami()
    assert info["name"] == "alice"
    assert [org["name"] for org in info["orgs"]] == ["acme"]
    assert info["auth"]["accessToken"]["role"] == "write"


def test_read_token_has_read_role(kforge_hub):
    token = kforge_hub.token("bob", write=False)
    info = HfApi(endpoint=kforge_hub.url, token=token).whoami()
    assert info["auth"]["accessToken"]["role"] == "read"


def test_unknown_token_is_rejected_with_401(kforge_hub):
    with pytest.raises(HfHubHTTPError) as excinfo:
        HfApi(endpoint=kforge_hub.url, token="hf_not_a_real_token").whoami()
    assert excinfo.value.response.status_code == 401
