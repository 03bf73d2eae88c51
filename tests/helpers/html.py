"""An HTML page's start tags and text, for checks on the pages we write (report.html, the viewer)."""

from __future__ import annotations

from html.parser import HTMLParser


class Tags(HTMLParser):
    """Every start tag with its attributes, and the page's text (character references decoded)."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)
