"""Deterministic raw orders: the same day always yields the same orders, on any machine.

Each day has its own random generator seeded by the date, so one day can be (re)generated
without the others, which is what lets a backfill of a few days reproduce exactly what a full
recompute produces. Weekends are busier and dinner is slower, so the weekly reports have
something to show.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

ORDERS_PER_DAY = 300
_WEEKDAY_FACTOR = (0.85, 0.8, 0.9, 0.95, 1.2, 1.3, 1.1)  # Monday .. Sunday
_CANCEL_RATE = 0.03
_CUSTOMERS = 5000
_DRIVERS = 50


@dataclass(frozen=True)
class MenuItem:
    id: int
    name: str
    category: str
    price: Decimal


@dataclass(frozen=True)
class Restaurant:
    id: int
    cuisine: str
    prep_minutes: float


_MENU_TEXT = (
    ("Pizza", (("Margherita", "11.50"), ("Pepperoni", "13.00"), ("Quattro Formaggi", "14.50"))),
    ("Burgers", (("Cheeseburger", "10.90"), ("Veggie Burger", "10.50"), ("Double Bacon", "13.90"))),
    ("Sushi", (("Salmon Nigiri", "9.80"), ("California Roll", "8.90"), ("Dragon Roll", "14.20"))),
    ("Salads", (("Caesar Salad", "9.50"), ("Greek Salad", "9.20"))),
    ("Curry", (("Chicken Tikka", "12.80"), ("Green Curry", "12.20"), ("Dal", "9.90"))),
    ("Desserts", (("Tiramisu", "6.50"), ("Brownie", "5.20"))),
    ("Drinks", (("Lemonade", "3.50"), ("Iced Tea", "3.20"))),
)
MENU: tuple[MenuItem, ...] = tuple(
    MenuItem(100 * c + i, name, category, Decimal(price))
    for c, (category, items) in enumerate(_MENU_TEXT, start=1)
    for i, (name, price) in enumerate(items, start=1)
)
_CUISINES = ("Pizza", "Burgers", "Sushi", "Salads", "Curry")


def _restaurants() -> tuple[Restaurant, ...]:
    rng = random.Random("food_delivery/restaurants")
    return tuple(
        Restaurant(n, _CUISINES[n % len(_CUISINES)], rng.uniform(8, 25)) for n in range(1, 31)
    )


RESTAURANTS = _restaurants()
_DRIVER_SPEED = tuple(random.Random("food_delivery/drivers").uniform(0.8, 1.3) for _ in range(51))
_MENUS = {
    r.id: [m for m in MENU if m.category in (r.cuisine, "Desserts", "Drinks")] for r in RESTAURANTS
}


def _placed_at(rng: random.Random, day: date) -> datetime:
    pick = rng.random()
    if pick < 0.45:
        hours = rng.gauss(12.5, 1.0)  # lunch
    elif pick < 0.9:
        hours = rng.gauss(19.0, 1.3)  # dinner
    else:
        hours = rng.uniform(7, 23)
    seconds = min(max(int(hours * 3600), 0), 24 * 3600 - 1)
    return datetime.combine(day, time(), tzinfo=UTC) + timedelta(seconds=seconds)


def orders_for_day(day: date, orders_per_day: int = ORDERS_PER_DAY) -> list[tuple[object, ...]]:
    """The day's orders as rows in the column order of the `public.orders` table.

    About `orders_per_day` orders (more at weekends), sorted by order_id.
    """
    rng = random.Random(f"food_delivery/orders/{day.isoformat()}")
    count = max(1, round(orders_per_day * _WEEKDAY_FACTOR[day.weekday()] * rng.uniform(0.9, 1.1)))
    placed = sorted(_placed_at(rng, day) for _ in range(count))
    rows: list[tuple[object, ...]] = []
    for n, placed_at in enumerate(placed, start=1):
        restaurant = rng.choice(RESTAURANTS)
        item = rng.choice(_MENUS[restaurant.id])
        quantity = rng.choices((1, 2, 3), weights=(70, 22, 8))[0]
        customer = rng.randint(1, _CUSTOMERS)
        dispatched_at = delivered_at = driver = None
        status = "CANCELLED"
        if rng.random() >= _CANCEL_RATE:
            status = "DELIVERED"
            driver = rng.randint(1, _DRIVERS)
            prep = max(5.0, rng.gauss(restaurant.prep_minutes, 4))
            rush = 6.0 if 17 <= placed_at.hour < 21 else 0.0  # dinner traffic
            travel = (rng.uniform(8, 30) + rush) * _DRIVER_SPEED[driver]
            dispatched_at = placed_at + timedelta(seconds=int(prep * 60))
            delivered_at = dispatched_at + timedelta(seconds=int(travel * 60))
        rows.append(
            (
                day.toordinal() * 100_000 + n, placed_at, dispatched_at, delivered_at, status,
                customer, restaurant.id, driver, item.id, item.name, item.category, quantity,
                item.price * quantity, day,
            )
        )  # fmt: skip
    return rows
