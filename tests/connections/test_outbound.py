"""Outbound calls are the server's decision: whose key, which address, which parameters."""

from __future__ import annotations

import ipaddress

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from orbchat.connections import gateway, outbound, services
from orbchat.connections.models import Connection, ModelRoles
from tests.factories import client_for, make_owner, make_user
from tests.fakes.llm import Reply

pytestmark = pytest.mark.django_db

CANARY = "sk-canary-operator-key-0123456789"


@pytest.fixture
def owner():
    return make_owner()


@pytest.fixture
def user(owner):
    """A plain account: with it the server has two, so the automatic policy is public-only."""
    return make_user(actor=owner, username="plain")


@pytest.fixture
def no_allow_list(settings):
    settings.OUTBOUND_ALLOW = ""
    settings.OUTBOUND_POLICY = "auto"


def test_a_connection_without_a_key_never_sends_the_servers_environment_key(user, fake_llm, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    connection = services.connection_create(
        owner=user, name="Local", provider="local", model="m", api_base=fake_llm.base_url
    )
    fake_llm.script(Reply("ready"))
    worked, _ = gateway.test_connection(connection)
    assert worked
    assert fake_llm.requests[-1].headers["authorization"] == f"Bearer {gateway.NO_KEY}"
    assert all(CANARY not in str(request.headers) for request in fake_llm.requests)


def test_the_reported_attack_keyless_openai_redirected_by_extra_parameters_gets_no_key(
    user, fake_llm, monkeypatch
):
    """No key, provider OpenAI, extra parameters naming the attacker's server as base_url."""
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    connection = Connection.objects.create(
        owner=user,
        name="x",
        provider="openai",
        model="openai/gpt-4o",
        extra_params={"base_url": fake_llm.base_url},
    )
    worked, _ = gateway.test_connection(connection)
    assert not worked
    assert all(CANARY not in str(request.headers) for request in fake_llm.requests)
    assert fake_llm.requests == []


def test_a_keyless_cloud_connection_is_refused_before_any_call(user, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    connection = services.connection_create(owner=user, name="OpenAI", provider="openai", model="gpt-4o-mini")
    worked, message = gateway.test_connection(connection)
    assert not worked and message == "This connection has no API key; add one in Connections."


@pytest.mark.parametrize(
    "name", ["base_url", "api_base", "api_key", "extra_headers", "headers", "extra_body"]
)
def test_extra_parameters_cannot_say_where_a_call_goes_or_who_pays(user, fake_llm, name):
    with pytest.raises(ValidationError, match=f"not: {name}"):
        services.connection_create(
            owner=user, name="x", provider="openai", model="gpt-4o", api_key="sk-x", extra_params={name: "v"}
        )


def test_the_connection_form_names_the_refused_parameter(user):
    client = client_for(user)
    response = client.post(
        reverse("connections:create") + "?provider=openai",
        {"provider": "openai", "model": "gpt-4o", "api_key": "sk-x", "extra_params": '{"base_url": "x"}'},
    )
    assert response.status_code == 200
    assert "not: base_url" in response.content.decode()
    assert not Connection.objects.filter(owner=user).exists()


def test_a_saved_forbidden_parameter_is_never_sent(user, fake_llm, monkeypatch):
    """A row saved before the allow-list (or written by hand) cannot redirect the call."""
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)
    elsewhere = "http://127.0.0.1:9/v1"
    connection = Connection.objects.create(
        owner=user,
        name="Old",
        provider="local",
        model="openai/m",
        api_base=elsewhere,
        extra_params={"base_url": fake_llm.base_url, "api_key": None, "temperature": 0.3},
    )
    worked, message = gateway.test_connection(connection)
    assert not worked and "Could not reach" in message
    assert fake_llm.requests == []


@pytest.mark.parametrize(
    "api_base",
    [
        "http://127.0.0.1:{port}/v1",
        "http://localhost:{port}/v1",  # a name that resolves to loopback
        "http://[::1]:{port}/v1",
        "http://10.1.2.3/v1",
        "http://192.168.0.10:5001/v1",
        "http://169.254.169.254/latest",
        "http://0.0.0.0:{port}/v1",
    ],
)
def test_a_plain_user_cannot_point_a_connection_at_private_addresses(user, fake_llm, no_allow_list, api_base):
    url = api_base.format(port=fake_llm.port)
    with pytest.raises(ValidationError, match="does not call private or local addresses"):
        services.connection_create(owner=user, name="x", provider="local", model="m", api_base=url)


def test_the_check_runs_again_at_the_moment_of_the_call(user, fake_llm, settings):
    """Saved while the policy let it through; once the policy says public-only, the call is refused."""
    settings.OUTBOUND_ALLOW, settings.OUTBOUND_POLICY = "", "open"
    connection = services.connection_create(
        owner=user, name="x", provider="local", model="m", api_base=fake_llm.base_url
    )
    settings.OUTBOUND_POLICY = "auto"  # two accounts: public-only
    worked, message = gateway.test_connection(connection)
    assert not worked and "does not call private or local addresses" in message
    assert fake_llm.requests == []


def test_a_text_completion_call_is_checked_at_its_moment_too_and_its_body_keeps_to_the_list(
    user, fake_llm, settings
):
    settings.OUTBOUND_ALLOW, settings.OUTBOUND_POLICY = "", "open"
    connection = services.connection_create(
        owner=user, name="x", provider="local", model="m", api_base=fake_llm.base_url, api="text"
    )
    target = gateway.target_for(connection)
    fake_llm.script(Reply("fine"))
    text = gateway.complete(
        target, [{"role": "user", "content": "Hi"}], extra_body={"top_k": 5, "api_base": "http://evil/"}
    )
    assert text == "fine" and fake_llm.completions()[-1].body["top_k"] == 5
    assert "api_base" not in fake_llm.completions()[-1].body
    settings.OUTBOUND_POLICY = "auto"  # two accounts: public-only
    worked, message = gateway.test_connection(connection)
    assert not worked and "does not call private or local addresses" in message
    assert len(fake_llm.completions()) == 1


def test_an_administrator_may_call_a_local_server(owner, user, fake_llm, no_allow_list):
    connection = services.connection_create(
        owner=owner, name="Kobold", provider="local", model="m", api_base=fake_llm.base_url
    )
    fake_llm.script(Reply("ready"))
    assert gateway.test_connection(connection)[0]


def test_the_allow_list_opens_one_address_and_port(user, fake_llm, settings):
    settings.OUTBOUND_ALLOW = f"127.0.0.1:{fake_llm.port}"
    connection = services.connection_create(
        owner=user, name="Kobold", provider="local", model="m", api_base=fake_llm.base_url
    )
    fake_llm.script(Reply("ready"))
    assert gateway.test_connection(connection)[0]
    with pytest.raises(ValidationError, match="port 6379"):
        services.connection_create(
            owner=user, name="Redis", provider="local", model="m", api_base="http://127.0.0.1:6379/"
        )


def test_policy_open_lets_everyone_call_anything(user, fake_llm, settings):
    settings.OUTBOUND_ALLOW, settings.OUTBOUND_POLICY = "", "open"
    services.connection_create(owner=user, name="x", provider="local", model="m", api_base=fake_llm.base_url)


def test_policy_public_only_holds_even_with_one_account(settings):
    settings.OUTBOUND_POLICY = "public-only"
    assert outbound.policy() == "public-only"
    settings.OUTBOUND_POLICY = "auto"
    assert outbound.policy() == "open"  # no accounts at all yet
    make_owner()
    assert outbound.policy() == "open"


def test_models_signed_with_the_servers_cloud_credentials_are_for_administrators(owner, user):
    with pytest.raises(ValidationError, match="server's own cloud credentials"):
        services.connection_create(owner=user, name="x", provider="other", model="bedrock/anthropic.claude")
    services.connection_create(owner=owner, name="x", provider="other", model="bedrock/anthropic.claude")


def test_a_provider_error_reaches_the_person_masked_and_without_a_traceback(owner, fake_llm):
    connection = services.connection_create(
        owner=owner, name="x", provider="local", model="m", api_base=fake_llm.base_url
    )
    fake_llm.script(Reply(status=401, error_message="Incorrect API key provided: sk-proj-abcd1234efgh5678."))
    worked, message = gateway.test_connection(connection)
    assert not worked and message == "The provider refused the API key. Check the key in Settings → Models."
    assert "sk-proj" not in message and "abcd1234" not in message
    assert "Traceback" not in message and 'File "' not in message


def test_mask_hides_keys_and_drops_tracebacks():
    text = (
        'Traceback (most recent call last):\n  File "/x/y.py", line 3, in f\nboom\n'
        "Authorization: Bearer abc.def and AIzaSyD-0123456789abcdef and sk-ant-api03-XYZ"
    )
    assert (
        gateway.mask("Bad key sk-ant-api03-XYZ*** given, Bearer tok123") == "Bad key [hidden] given, [hidden]"
    )
    assert gateway.mask(text) == ""
    long = gateway.mask("word " * 1000)
    assert long.endswith("…") and len(long) <= gateway.MAX_ERROR_CHARS


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("8.8.8.8", True),
        ("127.0.0.1", False),
        ("10.0.0.1", False),
        ("172.16.5.4", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),
        ("100.64.0.1", False),
        ("0.0.0.0", False),
        ("::1", False),
        ("fe80::1", False),
        ("fd00::1", False),
        ("::ffff:127.0.0.1", False),
        ("2606:4700:4700::1111", True),
    ],
)
def test_which_addresses_are_public(address, public):
    assert outbound.is_public(ipaddress.ip_address(address)) is public


def test_the_allow_list_parses_addresses_networks_and_ports():
    entries = outbound.parse_allow("127.0.0.1:5001, 10.0.0.0/8, [::1]:8080, 192.168.1.5")
    assert outbound.refusal("h", 5001, ["127.0.0.1"], entries) == ""
    assert outbound.refusal("h", 5002, ["127.0.0.1"], entries) != ""
    assert outbound.refusal("h", 1, ["10.9.8.7"], entries) == ""
    assert outbound.refusal("h", 8080, ["::1"], entries) == ""
    assert outbound.refusal("h", 80, ["192.168.1.5"], entries) == ""
    assert outbound.refusal("h", 80, ["8.8.8.8", "127.0.0.1"], []) != ""  # one private answer is enough
    with pytest.raises(ValueError, match="OUTBOUND_ALLOW"):
        outbound.parse_allow("not an address")


def test_only_an_administrator_may_use_a_local_crossencoder_folder(owner, user, tmp_path, settings):
    settings.LOCAL_MODELS_DIR = tmp_path
    kwargs = {"chat": None, "utility": None, "embedding": None, "rerank_kind": ModelRoles.Rerank.LOCAL}
    refusals = set()
    for path in ("/root", "/no/such/folder", "model"):
        with pytest.raises(ValidationError) as caught:
            services.model_roles_update(user=user, rerank_local_path=path, **kwargs)
        refusals.add(caught.value.messages[0])
    assert refusals == {"Only an administrator can use a local CrossEncoder folder."}
    with pytest.raises(ValidationError, match="must be a folder inside"):
        services.model_roles_update(user=owner, rerank_local_path="/root", **kwargs)
    (tmp_path / "model").mkdir()
    services.model_roles_update(user=owner, rerank_local_path="model", **kwargs)
