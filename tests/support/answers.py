"""A Home Assistant-style answer in each language the models speak."""

ANSWERS = {
    "en": "The kitchen light is on and the front door is locked.",
    "fr": "La lumière de la cuisine est allumée et la porte d'entrée est fermée.",
    "de": "Das Licht in der Küche ist an und die Haustür ist abgeschlossen.",
    "it": "La luce della cucina è accesa e la porta d'ingresso è chiusa.",
    "pt": "A luz da cozinha está acesa e a porta da frente está trancada.",
    "es": "La luz de la cocina está encendida y la puerta principal está cerrada.",
    "nl": "Het licht in de keuken is aan en de voordeur is op slot.",
}
