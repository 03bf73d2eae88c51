"""Child process of `extract_pdf_bounded`: a PDF on stdin, its extracted text as JSON on stdout."""

from __future__ import annotations

import dataclasses
import json
import sys

from lifesearch_local.web.extract import extract_pdf


def main() -> int:
    body = sys.stdin.buffer.read()
    ex = extract_pdf(body, max_pages=int(sys.argv[1]))
    sys.stdout.write(json.dumps(dataclasses.asdict(ex), ensure_ascii=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
