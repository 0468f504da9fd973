from django.apps import AppConfig


class RoomsConfig(AppConfig):
    name = "rooms"

    def ready(self) -> None:
        from rooms import receivers  # noqa: F401 - connects the receivers
