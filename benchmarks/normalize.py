"""Text normalisation's cost: microseconds per Home Assistant sentence, per language.

Each language has a paragraph of about 200 characters full of what normalisation
rewrites (temperatures, percentages, a time, a date, energy, wind, money). A round
normalises it `--count` times; the figure is the best of `--rounds` rounds, with the
cost of the very first call (compiling the language's patterns) apart.
Usage: python benchmarks/normalize.py [--count N] [--rounds N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from wyoming_pocket_tts.normalize import SUPPORTED_LANGUAGES, normalize

SENTENCES = {
    "en": "It is 21.5 °C and 64 % humidity. Your timer ends at 07:30, the front door opened "
          "at 19:05 and solar produced 12.4 kWh today. Wind 15 km/h, gusts 30. Next bin "
          "collection: 2026-12-09. It cost $3.50.",
    "fr": "Il fait 21,5 °C et 64 % d'humidité. Votre minuteur se termine à 07:30, la porte "
          "s'est ouverte à 19h05 et le solaire a produit 12,4 kWh. Vent 15 km/h, rafales 30. "
          "Collecte : 09/12/2026. Prix : 3,50 €.",
    "de": "Es sind 21,5 °C und 64 % Luftfeuchtigkeit. Dein Timer endet um 07:30 Uhr, die "
          "Haustür ging um 19:05 Uhr auf, heute 1.234,5 kWh. Wind 15 km/h, Böen 30. "
          "Abholung am 09.12.2026. Preis: 3,50 €.",
    "it": "Ci sono 21,5 °C e 64 % di umidità. Il timer termina alle 07:30, la porta si è "
          "aperta alle 19:05 e il fotovoltaico ha prodotto 12,4 kWh. Vento 15 km/h, raffiche "
          "30. Raccolta: 09/12/2026. Costo: 3,50 €.",
    "es": "Hace 21,5 °C y 64 % de humedad. Tu temporizador termina a las 07:30, la puerta se "
          "abrió a las 19:05 y la solar produjo 12,4 kWh. Viento 15 km/h, rachas 30. "
          "Recogida: 9 de diciembre de 2026. Precio: 3,50 €.",
    "pt": "Estão 21,5 °C e 64 % de humidade. O temporizador termina às 07:30, a porta abriu "
          "às 19h05 e os painéis produziram 12,4 kWh. Vento 15 km/h, rajadas 30. Recolha: "
          "09/12/2026. Preço: 3,50 €.",
    "nl": "Het is 21,5 °C en 64 % luchtvochtigheid. Je timer eindigt om 07:30, de voordeur "
          "ging open om 19:05 en de zonnepanelen leverden 12,4 kWh. Wind 15 km/h, windstoten "
          "30. Ophaaldag: 09-12-2026. Prijs: € 3,50.",
}


def _microseconds(sentence: str, language: str, count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        normalize(sentence, language)
    return (time.perf_counter() - started) / count * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000, help="sentences per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the best is shown")
    args = parser.parse_args()
    print(f"{'language':<9} {'chars':>5} {'first call µs':>14} {'µs/sentence':>12} "
          f"{'µs/100 chars':>13}")
    for language in SUPPORTED_LANGUAGES:
        sentence = SENTENCES[language]
        first = _microseconds(sentence, language, 1)
        best = min(_microseconds(sentence, language, args.count) for _ in range(args.rounds))
        print(f"{language:<9} {len(sentence):>5} {first:>14.0f} {best:>12.1f} "
              f"{best / len(sentence) * 100:>13.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
