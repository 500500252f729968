"""A small warehouse inventory: items, stock movements and reorder suggestions."""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path


@dataclass
class Item:
    sku: str
    name: str
    unit_price: float
    quantity: int = 0
    reorder_level: int = 10
    tags: list[str] = field(default_factory=list)

    def value(self) -> float:
        return self.unit_price * self.quantity

    def needs_reorder(self) -> bool:
        return self.quantity <= self.reorder_level


@dataclass
class Movement:
    sku: str
    delta: int
    day: date
    reason: str = ""


class InventoryError(Exception):
    pass


class Inventory:
    def __init__(self) -> None:
        self.items: dict[str, Item] = {}
        self.history: list[Movement] = []

    def add_item(self, item: Item) -> None:
        if item.sku in self.items:
            raise InventoryError(f"duplicate sku {item.sku}")
        self.items[item.sku] = item

    def get(self, sku: str) -> Item:
        try:
            return self.items[sku]
        except KeyError:
            raise InventoryError(f"unknown sku {sku}") from None

    def receive(self, sku: str, count: int, day: date | None = None) -> None:
        if count <= 0:
            raise InventoryError("count must be positive")
        item = self.get(sku)
        item.quantity += count
        self.history.append(Movement(sku, count, day or date.today(), "received"))

    def ship(self, sku: str, count: int, day: date | None = None) -> None:
        item = self.get(sku)
        if count > item.quantity:
            raise InventoryError(f"only {item.quantity} of {sku} in stock")
        item.quantity -= count
        self.history.append(Movement(sku, -count, day or date.today(), "shipped"))

    def total_value(self) -> float:
        return sum(item.value() for item in self.items.values())

    def low_stock(self) -> list[Item]:
        low = [item for item in self.items.values() if item.needs_reorder()]
        return sorted(low, key=lambda item: item.quantity)

    def reorder_plan(self, target_weeks: int = 4) -> dict[str, int]:
        plan = {}
        for item in self.low_stock():
            weekly = self.weekly_demand(item.sku)
            wanted = max(item.reorder_level * 2, weekly * target_weeks)
            plan[item.sku] = wanted - item.quantity
        return plan

    def weekly_demand(self, sku: str) -> int:
        shipped = [-m.delta for m in self.history if m.sku == sku and m.delta < 0]
        if not shipped:
            return 0
        days = {m.day for m in self.history if m.sku == sku and m.delta < 0}
        weeks = max(1, len(days) // 7)
        return sum(shipped) // weeks

    def by_tag(self, tag: str) -> list[Item]:
        return [item for item in self.items.values() if tag in item.tags]


def load_csv(path: Path) -> Inventory:
    inventory = Inventory()
    with path.open(newline="") as fh:
        for row in csv.DictReader(fh):
            item = Item(
                sku=row["sku"],
                name=row["name"],
                unit_price=float(row["unit_price"]),
                quantity=int(row.get("quantity") or 0),
                reorder_level=int(row.get("reorder_level") or 10),
                tags=[t for t in row.get("tags", "").split(";") if t],
            )
            inventory.add_item(item)
    return inventory


def save_json(inventory: Inventory, path: Path) -> None:
    data = {
        "items": [vars(item) for item in inventory.items.values()],
        "history": [
            {"sku": m.sku, "delta": m.delta, "day": m.day.isoformat(), "reason": m.reason}
            for m in inventory.history
        ],
    }
    path.write_text(json.dumps(data, indent=2))


def report(inventory: Inventory) -> str:
    lines = [f"{'sku':<10} {'name':<24} {'qty':>5} {'value':>10}"]
    for item in sorted(inventory.items.values(), key=lambda item: item.sku):
        lines.append(f"{item.sku:<10} {item.name:<24} {item.quantity:>5} {item.value():>10.2f}")
    lines.append(f"total value: {inventory.total_value():.2f}")
    return "\n".join(lines)
