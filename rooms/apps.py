from django.apps import AppConfig


class RoomsConfig(AppConfig):
    name = "rooms"

    def ready(self) -> None:
        # Imported here, not at the top: app modules may load only once the app registry is ready.
        from rooms import receivers  # noqa: F401 - connects the receivers
