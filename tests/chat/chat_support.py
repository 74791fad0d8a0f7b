"""What several chat tests send: the composer's request with two knowledge bases and agents."""

QUESTION = "Bimbamjob: invoices 2024, payments and relationship"
ASK = {
    "text": QUESTION,
    "model": "demo-large",
    "level": "approfondi",
    "resources": ["kb:factures", "kb:comptes-rendus", "agents"],
}
