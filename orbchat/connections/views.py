from __future__ import annotations

import json

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from memory.selectors import reindex_status
from orbchat.connections import gateway, providers, reranker, selectors, services
from orbchat.connections.forms import ConnectionForm, RolesForm
from orbchat.connections.models import Connection, ModelRoles
from orbchat.library.textformats import text_format_for

# The "Connect a model" page: ready forms for the common cases.
QUICK_STARTS = [
    ("openai", "OpenAI", "gpt-4o-mini", "Needs an API key from platform.openai.com."),
    ("anthropic", "Anthropic", "claude-sonnet-4-5", "Needs an API key from console.anthropic.com."),
    ("openrouter", "OpenRouter", "meta-llama/llama-3.1-70b-instruct", "One key, hundreds of models."),
    ("gemini", "Google Gemini", "gemini-2.0-flash", "Needs an API key from Google AI Studio."),
    ("ollama", "Ollama on this machine", "llama3.1", "Runs locally; no key."),
    ("local", "KoboldCpp / llama.cpp server", "local-model", "Any OpenAI-compatible server; no key."),
]


def _owned(request: HttpRequest, pk: int) -> Connection:
    return get_object_or_404(Connection, pk=pk, owner=request.user)


def connection_list(request: HttpRequest) -> HttpResponse:
    roles = selectors.model_roles_get(user=request.user)
    initial = {
        "chat": roles.chat,
        "utility": roles.utility,
        "embedding": roles.embedding,
        "rerank_kind": roles.rerank_kind,
        "rerank": roles.rerank,
        "rerank_local_path": roles.rerank_local_path,
    }
    form = RolesForm(request.POST or None, user=request.user, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            services.model_roles_update(user=request.user, **form.cleaned_data)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, "Model roles saved.")
            return redirect("connections:list")
    connections = Connection.objects.filter(owner=request.user)
    context = {
        "connections": connections,
        "form": form,
        "roles": roles,
        "reindex": reindex_status(request.user),
        "nav": "connections",
    }
    return render(request, "connections/list.html", context)


@require_POST
def rerank_test(request: HttpRequest) -> HttpResponse:
    """Run the user's Rerank role (built-in by default) on a tiny sample and show the order."""
    roles = selectors.model_roles_get(user=request.user)
    documents = ["A bird sings on the harbour wall.", "The red dragon sleeps under the lighthouse."]
    try:
        scores = reranker.scores_for(roles, "Where does the dragon sleep?", documents)
    except reranker.RerankFailed as exc:
        context = {"worked": False, "message": str(exc)}
    else:
        best = max(range(len(documents)), key=scores.__getitem__)
        context = {
            "worked": True,
            "message": f"Rerank works ({roles.get_rerank_kind_display()}): it put first “{documents[best]}”",
        }
    return render(request, "connections/_test_result.html", context)


def connect(request: HttpRequest) -> HttpResponse:
    return render(request, "connections/connect.html", {"quick_starts": QUICK_STARTS, "nav": "connections"})


def connection_create(request: HttpRequest) -> HttpResponse:
    provider = request.GET.get("provider", Connection.Provider.OTHER)
    api_base = providers.PROVIDERS.get(provider, ("", "", False))[1]
    model = next((m for key, _, m, _ in QUICK_STARTS if key == provider), "")
    initial = {"provider": provider, "api_base": api_base, "model": model}
    if request.GET.get("api") == Connection.Api.TEXT:
        initial["api"] = Connection.Api.TEXT
    form = ConnectionForm(request.POST or None, initial=initial, user=request.user)
    form.fields.pop("clear_api_key")
    if selectors.model_roles_get(user=request.user).utility_id is not None:
        form.fields.pop("also_utility")
    if request.method == "POST" and form.is_valid():
        data = {k: v for k, v in form.cleaned_data.items() if k != "clear_api_key"}
        try:
            connection = services.connection_create(owner=request.user, **data)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Connection {connection.name} saved. Test it below.")
            return redirect("connections:detail", pk=connection.pk)
    return render(request, "connections/form.html", {"form": form, "nav": "connections"})


def connection_detail(request: HttpRequest, pk: int) -> HttpResponse:
    connection = _owned(request, pk)
    initial = {
        "name": connection.name,
        "provider": connection.provider,
        "model": connection.model,
        "api_base": connection.api_base,
        "context_size": connection.context_size,
        "extra_params": json.dumps(connection.extra_params) if connection.extra_params else "",
        "api": connection.api,
        "text_backend": connection.text_backend,
        "instruct_template": connection.instruct_template,
        "context_template": connection.context_template,
        "system_prompt": connection.system_prompt,
    }
    form = ConnectionForm(request.POST or None, initial=initial, user=request.user)
    form.fields.pop("also_utility")
    if request.method == "POST" and form.is_valid():
        try:
            services.connection_update(connection=connection, **form.cleaned_data)
        except ValidationError as exc:
            form.add_error(None, exc)
        else:
            messages.success(request, f"Connection {connection.name} saved.")
            return redirect("connections:detail", pk=connection.pk)
    context = {
        "connection": connection,
        "form": form,
        "context_size": gateway.context_size(connection),
        "nav": "connections",
    }
    return render(request, "connections/form.html", context)


@require_POST
def use_chat_for_memory(request: HttpRequest) -> HttpResponse:
    """One click: the person's own Chat model also writes their memory summaries."""
    try:
        roles = services.model_roles_utility_from_chat(user=request.user)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"{roles.utility.name} now writes your memory summaries.")
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return redirect(target)
    return redirect("connections:list")


def _purpose(connection: Connection) -> str:
    """Return which role the connection plays for its owner, so the test fits it."""
    roles = selectors.model_roles_get(user=connection.owner)
    if roles.rerank_kind == ModelRoles.Rerank.REMOTE and roles.rerank_id == connection.pk:
        return "rerank"
    if roles.embedding_id == connection.pk:
        return "embedding"
    return "chat"


@require_POST
def connection_test(request: HttpRequest, pk: int) -> HttpResponse:
    connection = _owned(request, pk)
    text_format = text_format_for(connection)
    worked, message = gateway.test_connection(
        connection,
        purpose=_purpose(connection),
        template=text_format.instruct if text_format is not None else None,
    )
    context = {"worked": worked, "message": message}
    if request.htmx:
        return render(request, "connections/_test_result.html", context)
    (messages.success if worked else messages.error)(request, message)
    return redirect("connections:detail", pk=pk)


def connection_delete(request: HttpRequest, pk: int) -> HttpResponse:
    connection = _owned(request, pk)
    if request.method == "POST":
        services.connection_delete(connection=connection)
        messages.success(request, f"Connection {connection.name} deleted.")
        return redirect("connections:list")
    context = {"object": connection, "what": "connection", "nav": "connections"}
    return render(request, "library/confirm_delete.html", context)
