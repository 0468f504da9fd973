"""A room on a text-completion connection: one prompt text to /v1/completions, streamed back,
written with the connection's instruct and context templates, with the preset's samplers under
the backend's names."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async

from orbchat.connections import services as connection_services
from orbchat.library import services as library_services
from orbchat.library.selectors import persona_default
from rooms import prompting, services
from tests.fakes.llm import Reply
from tests.rooms.test_turns import done_message, open_socket, settle, until, variants_of_last

pytestmark = pytest.mark.django_db(transaction=True)

# A KoboldAI-style preset as SillyTavern saves one, with the samplers text-completion servers take.
KOBOLD_PRESET = {
    "temp": 0.8,
    "rep_pen": 1.1,
    "rep_pen_range": 1024,
    "rep_pen_slope": 0.7,
    "top_p": 0.9,
    "top_k": 40,
    "top_a": 0.1,
    "typical": 0.95,
    "tfs": 0.97,
    "min_p": 0.05,
    "mirostat": 2,
    "mirostat_tau": 5,
    "mirostat_eta": 0.1,
    "dry_multiplier": 0.8,
    "dry_base": 1.75,
    "dry_allowed_length": 2,
    "dry_sequence_breakers": '["\\n", ":"]',
    "xtc_threshold": 0.1,
    "xtc_probability": 0.5,
    "smoothing_factor": 0.3,
    "genamt": 120,
    "banned_tokens": '"As an AI"\n[1234]',
    "logit_bias": [{"text": "[42]", "value": -5}],
    "sampler_order": [6, 0, 1, 3, 4, 2, 5],
}
CHATML = {
    "name": "My ChatML",
    "input_sequence": "<|im_start|>user",
    "output_sequence": "<|im_start|>assistant",
    "system_sequence": "<|im_start|>system",
    "stop_sequence": "<|im_end|>",
    "input_suffix": "<|im_end|>\n",
    "output_suffix": "<|im_end|>\n",
    "system_suffix": "<|im_end|>\n",
    "wrap": True,
    "macro": True,
    "names_behavior": "always",
}
CARD = {
    "name": "Mira",
    "description": "Mira keeps the lighthouse.",
    "scenario": "A stormy night.",
    "first_mes": "The lamp is lit.",
    "system_prompt": "You are {{char}}; write one short reply.",
}


def _import(host, name: str, data: dict):
    return library_services.import_file(owner=host, filename=name, content=json.dumps(data).encode()).obj


@pytest.fixture
def text_room(host, fake_llm):
    preset = _import(host, "Kobold.json", KOBOLD_PRESET)
    template = _import(host, "My ChatML.json", CHATML)
    character = library_services.character_create(owner=host, card=CARD)
    room = services.room_create_from_character(host=host, character=character)
    services.room_update(room=room, preset=preset)
    connection_services.connection_create(
        owner=host,
        name="KoboldCpp",
        provider="local",
        model="koboldcpp/model",
        api_base=fake_llm.base_url,
        api="text",
        text_backend="koboldcpp",
        instruct_template=f"mine:{template.pk}",
        context_template="bundled:ChatML",
    )
    return room


def test_the_import_gives_a_preset_and_an_instruct_template(host, text_room):
    assert text_room.preset.name == "Kobold" and text_room.preset.extra["dry_multiplier"] == 0.8
    assert host.instruct_templates.get().name == "My ChatML"


@pytest.mark.asyncio
async def test_a_text_completion_room_streams_its_reply_from_v1_completions(host, text_room, fake_llm):
    fake_llm.script(Reply("The waves crash below.", token_delay=0.01))
    socket = await open_socket(host, text_room.pk)
    await socket.send_json_to({"type": "send", "text": "Is the ship safe?"})
    frame, seen = await until(socket, done_message)
    assert "".join(f["delta"] for f in seen if f["type"] == "token") == "The waves crash below."
    await settle()
    _, variants = await variants_of_last(text_room)
    assert variants[0].text == "The waves crash below." and variants[0].state == "done"
    await socket.disconnect()

    (request,) = fake_llm.completions()
    body = request.body
    persona = await sync_to_async(persona_default)(user=host)
    persona_line = f"{persona.description}\n" if persona.description.strip() else ""
    assert body["prompt"] == (
        "<|im_start|>system\nYou are Mira; write one short reply.\nMira keeps the lighthouse.\n"
        f"Scenario: A stormy night.\n{persona_line}".rstrip("\n")
        + "<|im_end|>\n"
        "<|im_start|>assistant\nMira: The lamp is lit.<|im_end|>\n"
        f"<|im_start|>user\n{persona.name}: Is the ship safe?<|im_end|>\n"
        "<|im_start|>assistant\nMira:"
    )
    assert body["model"] == "koboldcpp/model" and body["stream"] is True
    assert body["stop"] == [
        f"\n{persona.name}:",
        "\n<|im_end|>",
        "\n<|im_start|>user",
        "\n<|im_start|>assistant",
        "\n<|im_start|>system",
    ]
    # Every sampler of the preset, under KoboldCpp's names.
    expected = {
        "temperature": 0.8,
        "top_p": 0.9,
        "max_tokens": 120,
        "top_k": 40,
        "min_p": 0.05,
        "rep_pen": 1.1,
        "rep_pen_range": 1024,
        "rep_pen_slope": 0.7,
        "typical": 0.95,
        "tfs": 0.97,
        "top_a": 0.1,
        "smoothing_factor": 0.3,
        "mirostat": 2,
        "mirostat_tau": 5,
        "mirostat_eta": 0.1,
        "dry_multiplier": 0.8,
        "dry_base": 1.75,
        "dry_allowed_length": 2,
        "dry_sequence_breakers": ["\n", ":"],
        "xtc_threshold": 0.1,
        "xtc_probability": 0.5,
        "banned_tokens": ["As an AI"],
        "logit_bias": {"42": -5, "1234": -100},
    }
    assert {name: body.get(name) for name in expected} == expected
    assert "messages" not in body


def test_the_preview_shows_the_prompt_text(host, text_room):
    plan = prompting.plan_turn(turn=prompting.TurnContext.read(text_room.pk), seat=text_room.seats.get())
    preview = plan.preview()
    assert preview["text_prompt"].startswith("<|im_start|>system\nYou are Mira;")
    assert preview["text_prompt"].endswith("<|im_start|>assistant\nMira:")


def test_post_history_instructions_stay_out_unless_the_context_template_allows_them(host, text_room):
    plan = prompting.plan_turn(turn=prompting.TurnContext.read(text_room.pk), seat=text_room.seats.get())
    assert "Continue the roleplay" not in plan.text_prompt


@pytest.mark.asyncio
async def test_a_bad_key_on_a_text_connection_is_said_plainly_without_retry(host, text_room, fake_llm):
    fake_llm.script(Reply(status=401, error_message="Incorrect API key provided: sk-proj-abcdef123456."))
    socket, site = await open_socket(host, text_room.pk), await open_socket(host, None)
    await socket.send_json_to({"type": "send", "text": "Hello?"})
    notice, _ = await until(socket, lambda f: f["type"] == "notice")
    assert notice == {"type": "notice", "text": "The reply failed.", "retry": False}
    reason, _ = await until(site, lambda f: f["type"] == "notice")
    assert reason["text"] == (
        "The reply failed. The provider refused the API key. Check the key in Settings → Models."
    )
    await settle()
    for tab in (socket, site):
        await tab.disconnect()


def test_the_connection_page_offers_bundled_and_imported_templates_and_saves_the_choice(host, text_room):
    from django.urls import reverse

    from tests.factories import client_for

    client = client_for(host)
    connection = host.connections.get(name="KoboldCpp")
    listed = client.get(reverse("connections:list")).content.decode()
    assert "text completion (KoboldCpp)" in listed
    page = client.get(reverse("connections:detail", args=[connection.pk])).content.decode()
    template = host.instruct_templates.get()
    for option in (
        "Llama 3 Instruct (bundled)",
        "My ChatML (imported)",
        f'value="mine:{template.pk}" selected',
    ):
        assert option in page
    response = client.post(
        reverse("connections:detail", args=[connection.pk]),
        {
            "name": "KoboldCpp",
            "provider": "local",
            "model": "koboldcpp/model",
            "api_base": connection.api_base,
            "api": "text",
            "text_backend": "llamacpp",
            "instruct_template": "bundled:Llama 3 Instruct",
            "context_template": "bundled:Llama 3 Instruct",
            "system_prompt": "",
        },
    )
    assert response.status_code == 302
    connection.refresh_from_db()
    assert (connection.text_backend, connection.instruct_template) == ("llamacpp", "bundled:Llama 3 Instruct")
    plan = prompting.plan_turn(turn=prompting.TurnContext.read(text_room.pk), seat=text_room.seats.get())
    assert plan.text_prompt.startswith("<|start_header_id|>system<|end_header_id|>\n\nYou are Mira;")
    assert plan.params["extra_body"]["repeat_penalty"] == 1.1


def test_the_preview_page_shows_the_prompt_text(host, text_room):
    from django.urls import reverse

    from tests.factories import client_for

    page = client_for(host).get(reverse("rooms:preview", args=[text_room.pk])).content.decode()
    assert "Prompt text sent" in page and "&lt;|im_start|&gt;system" in page


@pytest.mark.asyncio
async def test_continue_on_a_text_connection_sends_the_reply_open_and_appends(host, text_room, fake_llm):
    fake_llm.script(Reply("The lamp"), Reply(" flickers."))
    socket = await open_socket(host, text_room.pk)
    await socket.send_json_to({"type": "send", "text": "Look."})
    await until(socket, done_message)
    await settle()
    await socket.send_json_to({"type": "continue"})
    await until(socket, lambda f: done_message(f) and "flickers" in f["html"])
    await settle()
    _, variants = await variants_of_last(text_room)
    assert variants[0].text == "The lamp flickers."
    await socket.disconnect()
    prompt = fake_llm.completions()[-1].body["prompt"]
    assert prompt.endswith("<|im_start|>assistant\nMira: The lamp")
    assert "Continue your last message" not in prompt


def _text_connection(host, fake_llm, model: str, **templates):
    connection = host.connections.get(name="KoboldCpp")
    connection.model = model
    for name, value in templates.items():
        setattr(connection, name, value)
    connection.save()
    return connection


def _plan(room):
    return prompting.plan_turn(turn=prompting.TurnContext.read(room.pk), seat=room.seats.get())


def test_a_new_text_connection_chooses_its_templates_by_model_name(host, fake_llm):
    connection = connection_services.connection_create(
        owner=host, name="New", provider="local", model="local-model", api_base=fake_llm.base_url, api="text"
    )
    assert (connection.instruct_template, connection.context_template) == ("auto", "auto")


def test_automatic_picks_the_template_whose_activation_regex_matches_the_model(host, text_room, fake_llm):
    _text_connection(
        host, fake_llm, "openai/Meta-Llama-3.1-8B-Instruct", instruct_template="auto", context_template="auto"
    )
    plan = _plan(text_room)
    assert plan.text_prompt.startswith("<|start_header_id|>system<|end_header_id|>\n\nYou are Mira;")
    assert plan.text_prompt.endswith("<|start_header_id|>assistant<|end_header_id|>\n\nMira:")
    templates = plan.preview()["text_templates"]
    assert templates["instruct"] == (
        "Llama 3 Instruct (bundled) — Automatic (by model name): its activation regex matches "
        "“Meta-Llama-3.1-8B-Instruct”"
    )
    assert templates["context"] == (
        "Llama 3 Instruct (bundled) — Automatic (by model name): the same name as the instruct template"
    )


def test_when_no_regex_matches_automatic_falls_back_to_chatml(host, text_room, fake_llm):
    _text_connection(
        host, fake_llm, "openai/koboldcpp/model", instruct_template="auto", context_template="auto"
    )
    plan = _plan(text_room)
    assert plan.text_prompt.startswith("<|im_start|>system\nYou are Mira;")
    assert plan.preview()["text_templates"]["instruct"] == (
        "ChatML (bundled) — Automatic (by model name): no template's activation regex matches "
        "“koboldcpp/model”, so the default"
    )


def test_an_imported_template_with_a_matching_regex_wins_and_a_broken_one_is_skipped(
    host, text_room, fake_llm
):
    _import(host, "Broken.json", {**CHATML, "name": "Broken", "activation_regex": "/(unclosed/i"})
    story = {**CHATML, "name": "Story", "output_sequence": "[A]", "activation_regex": "/story/i"}
    _import(host, "Story.json", story)
    _import(host, "Story context.json", {"name": "Story", "story_string": "STORY {{description}}"})
    _text_connection(
        host, fake_llm, "openai/storyteller-13b", instruct_template="auto", context_template="auto"
    )
    plan = _plan(text_room)
    assert plan.text_prompt.startswith("STORY Mira keeps the lighthouse.\n")
    assert plan.text_prompt.endswith("[A]\nMira: The lamp is lit.<|im_end|>\n[A]\nMira:")
    templates = plan.preview()["text_templates"]
    assert templates["instruct"].startswith(
        "Story (imported) — Automatic (by model name): its activation regex"
    )
    assert templates["context"].startswith("Story (imported) — Automatic")


def test_the_preview_page_says_which_templates_wrote_the_prompt(host, text_room):
    from django.urls import reverse

    from tests.factories import client_for

    page = client_for(host).get(reverse("rooms:preview", args=[text_room.pk])).content.decode()
    assert "Instruct template" in page and "My ChatML (imported)" in page
    assert "ChatML (bundled)" in page


def test_a_context_template_in_chat_at_a_depth_moves_the_story_string(host, text_room, fake_llm):
    context = _import(
        host,
        "In chat.json",
        {
            "name": "In chat",
            "story_string": "{{description}}",
            "story_string_position": 1,
            "story_string_depth": 0,
            "story_string_role": 0,
        },
    )
    _text_connection(host, fake_llm, "koboldcpp/model", context_template=f"mine:{context.pk}")
    plan = _plan(text_room)
    assert plan.text_prompt == (
        "<|im_start|>assistant\nMira: The lamp is lit.<|im_end|>\n"
        "<|im_start|>system\nMira keeps the lighthouse.<|im_end|>\n"
        "<|im_start|>assistant\nMira:"
    )
