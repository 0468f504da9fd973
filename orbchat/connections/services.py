"""Writes to a user's model connections and roles. API keys are stored encrypted only."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction

from orbchat.accounts.models import User
from orbchat.connections import outbound, providers, reranker, secrets, signals
from orbchat.connections.models import Connection, ModelRoles


def _validate(*, owner: User, provider: str, model: str, api_base: str, extra_params: dict | None) -> None:
    if not model.strip():
        raise ValidationError("Name the model, e.g. gpt-4o-mini.")
    if provider == Connection.Provider.LOCAL and not api_base:
        raise ValidationError("A local OpenAI-compatible server needs its API base URL.")
    refused = providers.extra_refused(extra_params or {})
    if refused:
        raise ValidationError(
            f"Extra parameters may set samplers and request options only, not: {', '.join(refused)}. "
            "The API base and key have fields of their own."
        )
    if providers.uses_server_credentials(model) and not owner.can_manage_users:
        raise ValidationError(providers.SERVER_CREDENTIALS_REFUSED)
    if api_base and outbound.guarded(owner):
        try:
            outbound.check(api_base)
        except outbound.OutboundRefused as exc:
            if "could not be resolved" not in str(exc):  # the call itself will say so, later
                raise ValidationError(str(exc)) from exc


@transaction.atomic
def connection_create(
    *,
    owner: User,
    name: str,
    provider: str,
    model: str,
    api_base: str = "",
    api_key: str = "",
    extra_params: dict | None = None,
    context_size: int | None = None,
    also_utility: bool = False,
    api: str | None = None,
    text_backend: str | None = None,
    instruct_template: str = "auto",
    context_template: str = "auto",
    system_prompt: str = "",
) -> Connection:
    """Save a connection; the first becomes the Chat model and, with `also_utility`, the Utility one."""
    _validate(owner=owner, provider=provider, model=model, api_base=api_base, extra_params=extra_params)
    connection = Connection.objects.create(
        owner=owner,
        name=name or model,
        provider=provider,
        model=providers.litellm_model(provider, model),
        api_base=api_base,
        api_key_encrypted=secrets.encrypt(api_key.strip()),
        extra_params=extra_params or {},
        context_size=context_size,
        api=api or Connection.Api.CHAT,
        text_backend=text_backend or Connection.TextBackend.KOBOLDCPP,
        instruct_template=instruct_template,
        context_template=context_template,
        system_prompt=system_prompt,
    )
    roles = _model_roles_locked(owner)
    filled = []
    if roles.chat_id is None:  # the first connection becomes the Chat model
        roles.chat = connection
        filled.append("chat")
    if also_utility and roles.utility_id is None:  # and writes memory summaries
        roles.utility = connection
        filled.append("utility")
    if filled:
        roles.save(update_fields=filled)
    return connection


@transaction.atomic
def connection_update(
    *,
    connection: Connection,
    name: str,
    provider: str,
    model: str,
    api_base: str = "",
    api_key: str = "",
    clear_api_key: bool = False,
    extra_params: dict | None = None,
    context_size: int | None = None,
    api: str | None = None,
    text_backend: str | None = None,
    instruct_template: str | None = None,
    context_template: str | None = None,
    system_prompt: str | None = None,
) -> Connection:
    """Update a connection; an empty api_key keeps the saved one unless clear_api_key.

    The text-completion settings left None keep what is saved.
    """
    _validate(
        owner=connection.owner, provider=provider, model=model, api_base=api_base, extra_params=extra_params
    )
    connection.name = name or model
    connection.provider = provider
    connection.model = providers.litellm_model(provider, model)
    connection.api_base = api_base
    connection.extra_params = extra_params or {}
    connection.context_size = context_size
    text_settings = {
        "api": api,
        "text_backend": text_backend,
        "instruct_template": instruct_template,
        "context_template": context_template,
        "system_prompt": system_prompt,
    }
    for name, value in text_settings.items():
        if value is not None:
            setattr(connection, name, value)
    if clear_api_key:
        connection.api_key_encrypted = ""
    elif api_key.strip():
        connection.api_key_encrypted = secrets.encrypt(api_key.strip())
    connection.save()
    return connection


@transaction.atomic
def connection_delete(*, connection: Connection) -> None:
    connection.delete()


def _model_roles_locked(user: User) -> ModelRoles:
    """The user's model roles row, made on first write and locked for this transaction."""
    roles, _ = ModelRoles.objects.select_for_update().get_or_create(user=user)
    return roles


@transaction.atomic
def model_roles_utility_from_chat(*, user: User) -> ModelRoles:
    """Let the user's own Chat connection write their memory summaries (their Utility role)."""
    roles = _model_roles_locked(user)
    if roles.chat is None:
        raise ValidationError("Connect a Chat model first.")
    if roles.chat.owner_id != user.pk:
        raise ValidationError("That connection is not yours.")
    roles.utility = roles.chat
    roles.save(update_fields=["utility"])
    return roles


@transaction.atomic
def model_roles_update(
    *,
    user: User,
    chat: Connection | None,
    utility: Connection | None,
    embedding: Connection | None,
    rerank_kind: str,
    rerank: Connection | None = None,
    rerank_local_path: str = "",
) -> ModelRoles:
    for connection in (chat, utility, embedding, rerank):
        if connection is not None and connection.owner_id != user.pk:
            raise ValidationError("That connection is not yours.")
    if rerank_kind == ModelRoles.Rerank.REMOTE and rerank is None:
        raise ValidationError("Remote rerank needs a connection.")
    if rerank_kind == ModelRoles.Rerank.LOCAL:
        if not user.can_manage_users:
            raise ValidationError("Only an administrator can use a local CrossEncoder folder.")
        if not rerank_local_path.strip():
            raise ValidationError("A local CrossEncoder needs the path of its model folder.")
        try:
            reranker.local_folder(rerank_local_path.strip())
        except reranker.RerankFailed as exc:
            raise ValidationError(str(exc)) from exc
    roles = _model_roles_locked(user)
    embedding_changed = roles.embedding_id != (embedding.pk if embedding else None)
    roles.chat, roles.utility, roles.embedding = chat, utility, embedding
    roles.rerank_kind, roles.rerank, roles.rerank_local_path = rerank_kind, rerank, rerank_local_path.strip()
    roles.save()
    if embedding_changed:
        # A new embedding model means a new index: memory builds it (it listens for this).
        transaction.on_commit(lambda: signals.embedding_changed.send(sender=ModelRoles, user=user))
    return roles
