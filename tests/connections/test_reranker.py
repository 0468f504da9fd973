from __future__ import annotations

import pytest
from django.urls import reverse

from orbchat.connections import reranker, services
from orbchat.connections.models import ModelRoles
from tests.factories import make_owner


def test_lexical_scores_reward_rare_exact_words():
    documents = ["The harbour was quiet.", "Maren hid the brass key.", "The harbour key was lost."]
    scores = reranker.lexical_scores("brass key", documents)
    assert scores.index(max(scores)) == 1
    assert scores[0] == 0.0


def test_blend_keeps_cosine_on_its_scale_and_scales_lexical_to_the_best():
    assert reranker.blend([0.2, 0.4], [10.0, 0.0]) == pytest.approx([0.7 * 0.2 + 0.3, 0.7 * 0.4])
    assert reranker.blend([0.5, 0.5], [0.0, 0.0]) == pytest.approx([0.35, 0.35])


def test_blend_does_not_stretch_tiny_cosine_differences():
    """Two near-identical cosines stay near-identical: the exact word decides."""
    scores = reranker.blend([0.5652907, 0.5652906, 0.50], [0.0, 0.0, 4.0])
    assert scores.index(max(scores)) == 2


def test_builtin_reranker_puts_the_answer_first():
    documents = [
        "Sailors sang about whales all night.",
        "Maren tucked the brass key beneath the ledger in the lamp room.",
        "Fog rolled over the harbour and the bell rang twice.",
    ]
    scores = reranker.builtin_scores("Where did Maren hide the key?", documents)
    assert scores.index(max(scores)) == 1


def test_a_missing_crossencoder_folder_is_named(tmp_path, settings):
    settings.LOCAL_MODELS_DIR = tmp_path
    with pytest.raises(reranker.RerankFailed, match="No CrossEncoder model folder"):
        reranker.local_scores("nowhere", "q", ["d"])


@pytest.mark.django_db
def test_remote_rerank_through_litellm(fake_llm):
    owner = make_owner()
    connection = services.connection_create(
        owner=owner,
        name="Rerank",
        provider="other",
        model="hosted_vllm/bge-reranker",
        api_base=fake_llm.base_url.removesuffix("/v1"),
    )
    roles = services.model_roles_update(
        user=owner,
        chat=None,
        utility=None,
        embedding=None,
        rerank_kind=ModelRoles.Rerank.REMOTE,
        rerank=connection,
    )
    scores = reranker.scores_for(roles, "red dragon", ["a blue bird", "the red dragon sleeps"])
    assert scores[1] > scores[0]
    assert fake_llm.requests[-1].path.endswith("/rerank")


@pytest.mark.django_db
def test_the_roles_page_checks_the_builtin_reranker(client):
    owner = make_owner()
    client.force_login(owner)
    response = client.post(reverse("connections:rerank_test"))
    assert "Rerank works (Built-in local reranker)" in response.content.decode()
    assert "The red dragon sleeps" in response.content.decode()


@pytest.mark.django_db
def test_an_embedding_connection_is_tested_as_an_embedder(client, fake_llm):
    owner = make_owner()
    connection = services.connection_create(
        owner=owner, name="Embed", provider="local", model="fake-embed", api_base=fake_llm.base_url
    )
    services.model_roles_update(
        user=owner, chat=None, utility=None, embedding=connection, rerank_kind="builtin"
    )
    client.force_login(owner)
    response = client.post(reverse("connections:test", args=[connection.pk]), HTTP_HX_REQUEST="true")
    assert "returned a vector of 26 numbers" in response.content.decode()
