"""MineDojo's ``minedojo.sim``: the initial-inventory record ``minedojo.make`` takes."""

from dataclasses import dataclass


@dataclass
class InventoryItem:
    slot: int
    name: str
    variant: int | None
    quantity: int
