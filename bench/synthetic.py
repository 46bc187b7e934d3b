"""Seeded synthetic memories and questions for the performance benches: one-sentence facts about a
few thousand people (jobs, cities, pets, hobbies, dates), varied enough that every arm of recall has
work to do and no two facts are the same, and questions shaped like an agent's."""

from __future__ import annotations

import random

FIRST = ["Alice", "Bruno", "Chen", "Dalia", "Emeka", "Farah", "Gustav", "Hana", "Ivan", "Jamila", "Kenji",
         "Lucia", "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Sami", "Tove", "Umar", "Vera",
         "Wen", "Ximena", "Yusuf", "Zofia", "Arjun", "Bea", "Cyrus", "Dmitri", "Elif", "Femi", "Greta",
         "Hugo", "Ines", "Jonas", "Kaveh", "Leila", "Marek", "Noor", "Olga", "Pablo", "Rania", "Soren"]
LAST = ["Okafor", "Lindqvist", "Moreau", "Tanaka", "Kowalski", "Haddad", "Silva", "Novak", "Reyes", "Banerjee",
        "Fischer", "Ivanova", "Mensah", "O'Brien", "Petrov", "Quispe", "Rossi", "Sato", "Toure", "Ueda",
        "Varga", "Wagner", "Yilmaz", "Zhou", "Abebe", "Brennan", "Costa", "Dubois", "Eriksen", "Farouk"]
CITIES = ["Lisbon", "Nairobi", "Osaka", "Quito", "Tallinn", "Hanoi", "Porto", "Dakar", "Bergen", "Cusco",
          "Zagreb", "Perth", "Leipzig", "Tbilisi", "Oaxaca", "Galway", "Malmo", "Kochi", "Bilbao", "Hobart",
          "Accra", "Riga", "Valparaiso", "Sapporo", "Tunis", "Ghent", "Cork", "Lyon", "Krakow", "Medellin"]
JOBS = ["nurse", "carpenter", "data analyst", "violinist", "pharmacist", "bus driver", "architect", "chef",
        "librarian", "marine biologist", "welder", "translator", "pilot", "dentist", "game designer",
        "firefighter", "journalist", "beekeeper", "physics teacher", "tailor", "geologist", "baker"]
PETS = [("greyhound", "a rescue greyhound"), ("parrot", "a grey parrot"), ("tortoise", "an old tortoise"),
        ("cat", "a ginger cat"), ("ferret", "a playful ferret"), ("rabbit", "a lop-eared rabbit"),
        ("goldfish", "two goldfish"), ("husky", "a blue-eyed husky"), ("iguana", "a green iguana")]
HOBBIES = ["the cello", "rock climbing", "pottery", "chess", "birdwatching", "sourdough baking", "kayaking",
           "astronomy", "calligraphy", "salsa dancing", "beekeeping", "woodcarving", "trail running", "origami"]
FOODS = ["lentil curry", "ramen", "ceviche", "pierogi", "jollof rice", "bouillabaisse", "falafel", "pho",
         "goulash", "tamales", "kimchi stew", "moussaka", "empanadas", "risotto"]
EVENTS = ["book fair", "harbour festival", "chess tournament", "wedding", "marathon", "jazz night",
          "science fair", "farmers market", "film premiere", "conference"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]


def person(rng: random.Random) -> str:
    return f"{rng.choice(FIRST)} {rng.choice(LAST)}"


def fact(rng: random.Random) -> str:
    """One sentence, one fact."""
    shapes = [
        lambda: f"{person(rng)} works as a {rng.choice(JOBS)} in {rng.choice(CITIES)}.",
        lambda: f"{person(rng)} moved to {rng.choice(CITIES)} in {rng.choice(MONTHS)} {rng.randint(2008, 2025)}.",
        lambda: f"{person(rng)} has {rng.choice(PETS)[1]} called {rng.choice(FIRST)}.",
        lambda: f"{person(rng)} took up {rng.choice(HOBBIES)} after visiting {rng.choice(CITIES)}.",
        lambda: f"{person(rng)} met {person(rng)} at the {rng.choice(EVENTS)} in {rng.choice(CITIES)}.",
        lambda: f"{person(rng)} was born in {rng.choice(CITIES)} and likes {rng.choice(FOODS)}.",
        lambda: f"In {rng.choice(MONTHS)} {rng.randint(2008, 2025)} {person(rng)} cooked {rng.choice(FOODS)} "
                f"for the {rng.choice(EVENTS)}.",
        lambda: f"{person(rng)} gave a talk on {rng.choice(HOBBIES)} at the {rng.choice(EVENTS)}.",
    ]
    return rng.choice(shapes)()


def facts(seed: int, count: int, offset: int = 0) -> list[str]:
    """`count` one-sentence facts; the same (seed, offset) always gives the same list."""
    rng = random.Random(seed * 1_000_003 + offset)
    return [fact(rng) for _ in range(count)]


def questions(seed: int, count: int) -> list[str]:
    """`count` distinct questions (distinct, so a query-embedding cache does not flatter the figures)."""
    rng = random.Random(seed * 7_919 + 3)
    shapes = [
        lambda: f"Where does {person(rng)} work?",
        lambda: f"Who moved to {rng.choice(CITIES)}?",
        lambda: f"What pet does {person(rng)} have?",
        lambda: f"Who works as a {rng.choice(JOBS)}?",
        lambda: f"What happened in {rng.choice(MONTHS)} {rng.randint(2008, 2025)}?",
        lambda: f"Who did {rng.choice(FIRST)} meet at the {rng.choice(EVENTS)}?",
        lambda: f"Which hobby did {rng.choice(FIRST)} take up?",
        lambda: f"Where was {person(rng)} born?",
        lambda: f"Who likes {rng.choice(FOODS)}?",
        lambda: f"Who has a {rng.choice(PETS)[0]}?",
    ]
    found: dict[str, None] = {}
    while len(found) < count:
        found[rng.choice(shapes)()] = None
    return list(found)
