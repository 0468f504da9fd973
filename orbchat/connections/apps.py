from django.apps import AppConfig


class ConnectionsConfig(AppConfig):
    name = "orbchat.connections"
    label = "connections"
    verbose_name = "Model connections"
