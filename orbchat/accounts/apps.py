from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "orbchat.accounts"
    label = "accounts"
    verbose_name = "Accounts"
