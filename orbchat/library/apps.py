from django.apps import AppConfig
from django.conf import settings


class LibraryConfig(AppConfig):
    name = "orbchat.library"
    label = "library"
    verbose_name = "Library"

    def ready(self) -> None:
        from PIL import Image

        # Pillow's own guard, for every image opened anywhere in the process, at the same limit.
        Image.MAX_IMAGE_PIXELS = settings.MAX_IMAGE_PIXELS
