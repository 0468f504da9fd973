from django.apps import AppConfig


class LibraryConfig(AppConfig):
    name = "orbchat.library"
    label = "library"
    verbose_name = "Library"
