"""The JSON verdict generate mode decodes under; its hash is part of a generate-mode judge's derived id."""

from __future__ import annotations

import hashlib
import json

# The verdict the judge prompt asks for, as the schema generate mode decodes under: a weak judge
# that would write prose still answers with it, in one attempt. The prompt asks for a reason of at
# most 30 words; 240 characters bound it (and so the tokens decoded per answer).
REASON_MAX_CHARS = 240
VERDICT_SCHEMA = {
    "type": "object",
    "properties": {"satisfied": {"type": "boolean"},
                   "reason": {"type": "string", "maxLength": REASON_MAX_CHARS}},
    "required": ["satisfied", "reason"],
    "additionalProperties": False,
}


def verdict_schema_hash() -> str:
    """sha256 (16 hex) of VERDICT_SCHEMA: another schema can change a generate-mode verdict."""
    return hashlib.sha256(json.dumps(VERDICT_SCHEMA, sort_keys=True).encode()).hexdigest()[:16]
