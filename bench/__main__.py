"""`python -m bench BENCHMARK [options]`: set up Django with OrbChat's settings, then run it."""

import os

import django

from bench import main

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "orbchat.settings")
    django.setup()
    main()
