"""The demo model's language: its texts table (every code in both languages, the same placeholders), the
detection of a question's language (French or English, the interface language when unsure), and a run in
each language writing only that language's sentences."""

from __future__ import annotations

import string

import pytest

from assistant.demo.model import LANGUAGES, TEXTS, DemoModel, say
from assistant.demo.model.info import DEMO_MODELS
from assistant.demo.model.language import detect, interface_language, language_of, scores
from assistant.demo.model.texts import Language
from assistant.engine.outcomes import AgentReport
from assistant.engine.types import Message, ModelRequest, NamedTool, ToolSpec


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


@pytest.mark.parametrize("code", sorted(TEXTS))
def test_every_code_has_both_languages_with_the_same_placeholders(code: str) -> None:
    texts = TEXTS[code]
    assert set(texts) == set(LANGUAGES)
    assert all(texts[lang].strip() for lang in LANGUAGES)
    assert _fields(texts["en"]) == _fields(texts["fr"])
    if len(texts["en"]) > 12:  # a sentence, not a name: translated
        assert texts["en"] != texts["fr"]


def test_a_sentence_with_a_count_agrees_with_it_in_each_language() -> None:
    assert not [code for code, texts in TEXTS.items() if "(s)" in texts["en"] or "(s)" in texts["fr"]]
    assert (
        say("handing_kbs", "en", count=1, model="m")
        == "I am handing the search of 1 knowledge base to an agent running m."
    )
    assert "2 knowledge bases to agents" in say("handing_kbs", "en", count=2, model="m")
    assert "0 knowledge bases" in say("handing_kbs", "en", count=0, model="m")
    assert "dans 0 base de connaissances à un agent" in say("handing_kbs", "fr", count=0, model="m")
    assert "dans 2 bases de connaissances à des agents" in say("handing_kbs", "fr", count=2, model="m")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Fiche complète sur Bimbamjob : facturation 2024, suivi, risque", "fr"),
        ("Que disent les contrats sur les pénalités de retard ?", "fr"),
        ("Quelles factures d’Acme sont en retard", "fr"),
        ("résumé", "fr"),  # an accent alone
        ("Orchidée Logistique invoices for 2024", "en"),  # a name's accent is no French
        ("What do the contracts say about late payment penalties?", "en"),
        ("Bimbamjob invoices and the payment plan", "en"),
        ("Summarise the meetings with Acme", "en"),
    ],
)
def test_a_question_s_language_is_detected(text: str, expected: str) -> None:
    assert detect(text) == expected
    assert language_of(text, "en" if expected == "fr" else "fr") == expected  # whatever the interface


@pytest.mark.parametrize("text", ["", "Bimbamjob", "Acme 2024", "Bimbamjob factures", "le the", "Orchidée Logistique"])
def test_unsure_falls_back_to_the_interface_language(text: str) -> None:
    assert detect(text) is None, scores(text)
    assert language_of(text, "fr") == "fr"
    assert language_of(text, "en") == "en"


def test_interface_language_codes() -> None:
    assert interface_language("fr") == "fr"
    assert interface_language("fr-CA") == "fr"
    assert interface_language("en-us") == "en"
    assert interface_language("de") == "en"
    assert interface_language(None) == "en"


@pytest.mark.parametrize(
    ("question", "interface", "expected"),
    [
        ("Que disent les documents sur Bimbamjob ?", "en", "fr"),
        ("What do the documents say about Bimbamjob?", "fr", "en"),
        ("Bimbamjob", "fr", "fr"),  # unsure: the interface language
        ("Bimbamjob", "en", "en"),
        ("Bimbamjob", None, "en"),
    ],
)
def test_the_demo_writes_in_the_question_s_language_else_the_interface_s(
    question: str, interface: str | None, expected: str
) -> None:
    model = DemoModel(DEMO_MODELS[0])
    request = ModelRequest(messages=(Message.system("s"), Message.user(question)), language=interface)
    assert model.language(request) == expected
    answer = model.respond(request).text  # no tool: it says what it is, in that language
    assert answer.endswith(say("footer", expected))
    other: Language = "en" if expected == "fr" else "fr"
    assert say("footer", other) not in answer


def test_an_agent_writes_in_its_instruction_s_language() -> None:
    model = DemoModel(DEMO_MODELS[1])
    submit = ToolSpec(name="submit_result", description="", parameters={"type": "object", "properties": {}})
    instruction = say("instruction_kb", "fr", words="Bimbamjob")
    request = ModelRequest(
        messages=(Message.system("s"), Message.user(f"Instruction: {instruction}\n\nYour scope: kb:factures")),
        tools=(submit,),
        language="en",
    )
    assert model.language(request) == "fr"
    [call] = model.respond(request).tool_calls
    assert say("nothing_in_scope", "fr") in call.arguments
    assert say("gap_word", "fr", word="Bimbamjob") in call.arguments


def test_a_report_s_text_reads_back_so_pages_and_the_demo_word_its_headings() -> None:
    report = AgentReport(findings="- Paid late [doc-1]", sources=["doc-1", "doc-2"], gaps=["nothing on risk", "x"])
    back = AgentReport.from_text(report.as_text())
    assert (back.findings, back.sources, back.gaps) == (report.findings, report.sources, report.gaps)
    alone = AgentReport.from_text("Only findings.")
    assert (alone.findings, alone.sources, alone.gaps) == ("Only findings.", [], [])


def test_the_demo_calls_the_clients_tool_when_its_tool_choice_asks() -> None:
    model = DemoModel(DEMO_MODELS[0])
    remind = ToolSpec(
        name="send_reminder",
        description="Send a payment reminder.",
        parameters={"type": "object", "properties": {"invoice": {"type": "string"}, "days": {"type": "integer"}},
                    "required": ["invoice", "days"]},
    )  # fmt: skip
    question = Message.user("Remind Bimbamjob of F-2024-077.")
    for choice in (NamedTool("send_reminder"), "required"):
        request = ModelRequest(messages=(Message.system("s"), question), tools=(remind,), tool_choice=choice)
        [call] = model.respond(request).tool_calls
        assert call.name == "send_reminder"
        assert call.parsed_arguments() == {"invoice": "Remind Bimbamjob of F-2024-077.", "days": 0}
    answered = ModelRequest(messages=(Message.system("s"), question), tools=(remind,))  # auto: it answers
    assert not model.respond(answered).tool_calls


def test_a_table_s_listing_line_is_never_quoted_from_its_document() -> None:
    """A table's document starts with the product's line for the models ("Table factures: 20 rows; columns: …", in
    English): the demo quotes the document's rows, never that line, in an answer in either language."""
    from assistant.demo.model.words import extract

    doc = {
        "text": "Table factures: 20 rows; columns: client (VARCHAR), montant (DOUBLE).\nBimbamjob | F-2024-031 | 18400.0"
    }
    for words in (["factures"], ["Bimbamjob"], ["absent"]):
        quoted = extract(doc, words)
        assert quoted and not any(s.startswith("Table ") for s in quoted), quoted
