"""Images for an extraction call, when the configured model reads them (ENGRAM_LLM_VISION=true):
the chunk's image blocks go into its user message as OpenAI-style `image_url` parts (data URLs),
after the text, so the model extracts facts from what they show as well."""

from __future__ import annotations

import base64
from typing import Any

from engram.retain.attachments import BlockAttachment

MAX_IMAGES_PER_CALL = 8


def with_images(messages: list[dict[str, Any]], images: list[BlockAttachment]) -> list[dict[str, Any]]:
    """`messages` with the images appended to the last user message (at most 8)."""
    if not images:
        return messages
    parts = [
        {"type": "image_url",
         "image_url": {"url": f"data:{image.media_type};base64,{base64.b64encode(image.data).decode()}"}}
        for image in images[:MAX_IMAGES_PER_CALL]
    ]
    out = list(messages)
    for index in range(len(out) - 1, -1, -1):
        if out[index].get("role") == "user":
            text = out[index]["content"]
            note = "\n\nImages shown with this text follow; extract facts from what they show too."
            out[index] = {**out[index], "content": [{"type": "text", "text": text + note}, *parts]}
            break
    return out
