"""What the browser tests look at a page with: the two widths and where screenshots go."""

from __future__ import annotations

from pathlib import Path

SIZES = {"desktop": {"width": 1366, "height": 900}, "phone": {"width": 390, "height": 844}}
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-results" / "screenshots"
