"""Echoes its params: the console's generated form (strings, integers, numbers, booleans, an
enum, an array, a nested object with a required field) is checked by what arrives here."""

from __future__ import annotations

from typing import Any

from ether_agent import Agent

agent = Agent("order-form", version="1.0.0", description="Echoes an order back.")

ORDER = {
    "type": "object",
    "properties": {
        "item": {"type": "string", "minLength": 2, "description": "What to order"},
        "quantity": {"type": "integer", "minimum": 1, "maximum": 10},
        "price": {"type": "number"},
        "gift": {"type": "boolean"},
        "speed": {"type": "string", "enum": ["standard", "express"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "address": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
            },
            "required": ["city"],
        },
    },
    "required": ["item", "quantity", "address"],
}


@agent.action(description="Take an order and echo it.", schema=ORDER)
def order(params: dict[str, Any]) -> dict[str, Any]:
    return params


if __name__ == "__main__":
    agent.run()
