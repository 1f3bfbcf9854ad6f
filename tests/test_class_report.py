"""The class report: its numbers are those of verdicts.jsonl, its mistakes and first problems are the
causes each student's own report tells, a class's text stays text, every student's page exists under a
safe name, and a real browser draws the pages offline with no error.

Results folders are written here without grading (the report reads only files);
tests/test_shards.py grades a small class with catalogued mistakes and checks its report too.
"""

from __future__ import annotations

import csv
import json
import os
from html.parser import HTMLParser
from pathlib import Path

import pytest

from grader import cli
from grader.integrations.class_report import page_names, render, root_causes, summarise, write_report
from grader.integrations.results import read_results

NAME = "<script>alert(1)</script>"
HTML_MESSAGE = "Your layer printed <img src=x onerror=alert(3)><script>alert(4)</script> & raised"


def check(check_id: str, status: str, message: str = "") -> dict:
    topic = check_id.split(".")[0]
    return {"id": check_id, "title": f"title of {check_id}", "topic": topic, "status": status,
            "points": 1.0 if status == "passed" else 0.0, "max_points": 1.0, "message": message}


SKIPPED = "Not checked: it needs the weights (see check weights.two_norms)."


def verdict(identity: str, statuses: dict[str, str], student: str | None = None, error: str | None = None,
            messages: dict[str, str] | None = None) -> dict:
    messages = messages or {}
    checks = [] if error else [check(i, s, SKIPPED if s == "skipped" else messages.get(i, f"{i} is wrong"))
                               for i, s in statuses.items()]
    score = sum(c["points"] for c in checks)
    status = "error" if error else ("passed" if all(c["status"] == "passed" for c in checks) else "failed")
    return {"exercise": "exercise3", "submission": f"/class/{identity}.py", "status": status, "score": score,
            "max_score": 4.0, "error": error, "checks": checks, "id": identity, "student": student,
            "graded_at": "2026-12-01T10:00:00+00:00", "seed": 11, "grader_version": "0.1.0", "manual_points": 2}


ALL_PASS = {"api.output_shape": "passed", "weights.two_norms": "passed", "gradients.norms_differ": "passed",
            "mask.padding": "passed"}
SHARED = dict(ALL_PASS, **{"weights.two_norms": "failed", "gradients.norms_differ": "skipped"})
SHARED_AND_MASK = dict(SHARED, **{"mask.padding": "failed"})
MASK = dict(ALL_PASS, **{"mask.padding": "timeout"})
CLASS = [
    verdict("ann", ALL_PASS, "ann"),
    verdict("ben", SHARED, "ben"),
    verdict(NAME, SHARED, NAME, messages={"weights.two_norms": HTML_MESSAGE}),
    verdict("cat", SHARED, "cat"),
    verdict("dan", SHARED_AND_MASK, "dan"),
    verdict("eve", MASK, "eve"),
    verdict("fay", {}, "fay", error="SyntaxError at line 3: class TransformerEncoder(:"),
    verdict("gil", {}, None, error="ValueError: <b>bold</b><script>alert(2)</script>"),
]


def results_folder(folder: Path, verdicts: list[dict] = CLASS, seed=None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    ordered = sorted(verdicts, key=lambda v: v["id"])
    (folder / "verdicts.jsonl").write_text("".join(json.dumps(v) + "\n" for v in ordered), encoding="utf-8")
    with open(folder / "summary.csv", "w", encoding="utf-8", newline="", errors="backslashreplace") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "status", "score", "max_score", "seconds", "submission", "manual_points"])
        for index, v in enumerate(ordered):
            writer.writerow([v["id"], v["status"], v["score"], v["max_score"], f"{4 + index * 1.5:.2f}",
                             v["submission"], "2"])
    (folder / "run.json").write_text(json.dumps({
        "format": 1, "exercise": "exercise3", "shard": {"k": 1, "n": 1}, "seed": seed, "grader_version": "0.1.0",
        "timeout": 120.0, "memory_mb": 4096, "gradescope_visibility": "after_due_date",
        "sandbox": ["Landlock ABI 7: writes only in its scratch folder"], "class": sorted(v["id"] for v in verdicts)}))
    return folder


class Page(HTMLParser):
    """Every element's tag, the body rows of the tables of each class (cells as text), and all text."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.sections: list[str] = []  # the ids of the sections, in order
        self.links: list[tuple[str, str]] = []  # (href, text)
        self._link = None
        self.tags: list[str] = []
        self.tables: dict[str, list[list[str]]] = {}
        self.text: list[str] = []
        self._table, self._row, self._cell, self._in_body = None, None, None, False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        attributes = dict(attrs)
        if tag == "section":
            self.sections.append(attributes.get("id", ""))
        elif tag == "a":
            self._link = [attributes.get("href", ""), ""]
        if tag == "table":
            self._table = attributes.get("class", "")
            self.tables.setdefault(self._table, [])
        elif tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._table is not None and self._in_body:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "a" and self._link is not None:
            self.links.append(tuple(self._link))
            self._link = None
        if tag in ("td", "th") and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "tbody":
            self._in_body = False
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        self.text.append(data)
        if self._link is not None:
            self._link[1] += data
        if self._cell is not None:
            self._cell.append(data)


def test_pass_rates_group_sizes_and_ungradable_list_equal_the_verdicts(tmp_path):
    folder = results_folder(tmp_path / "out")
    verdicts = [json.loads(line) for line in (folder / "verdicts.jsonl").read_text().splitlines()]
    page = Page(render(read_results(folder)))

    graded = [v for v in verdicts if v["status"] != "error"]
    rows = {row[0]: row for row in (page.tables["checks"])}
    for check_id in ALL_PASS:
        statuses = [c["status"] for v in graded for c in v["checks"] if c["id"] == check_id]
        passed = statuses.count("passed")
        assert rows[check_id][2:7] == [str(statuses.count(s)) for s in ("passed", "failed", "error", "timeout",
                                                                        "skipped")]
        assert rows[check_id][7] == f"{100 * passed / len(statuses):.0f}%"
    # topics worst first: weights and gradients (2 of 6), mask (4 of 6), api (6 of 6)
    assert [row[0] for row in (page.tables["checks"])] == [
        "weights.two_norms", "gradients.norms_differ", "mask.padding", "api.output_shape"]

    # a mistake is a student's causes as their report tells them: ben and cat share one; NAME's check says
    # something else; dan has a second cause; eve's is the mask alone
    mistakes = page.tables["mistakes"]
    assert [(row[0], row[3]) for row in mistakes] == [("2", "ben, cat"), ("1", NAME), ("1", "dan"), ("1", "eve")]
    assert [row[1].split()[0] for row in mistakes] == ["weights.two_norms"] * 3 + ["mask.padding"]
    assert "mask.padding" in mistakes[2][1]  # dan's second cause
    assert mistakes[1][2] == HTML_MESSAGE  # shown as the text it is
    assert "gradients.norms_differ" not in "".join(row[1] for row in mistakes)  # skipped because of it: no cause
    assert sum(int(row[0]) for row in mistakes) == sum(1 for v in graded if root_causes(v))

    ungradable = (page.tables["ungradable"])
    assert [(row[0], row[2]) for row in ungradable] == [(v["id"], v["error"]) for v in verdicts
                                                        if v["status"] == "error"]
    scores = {int(row[0]): int(row[1]) for row in (page.tables["scores"])}
    assert scores == {points: count for points in range(5)
                      if (count := sum(int(v["score"]) == points for v in verdicts))}
    assert sum(scores.values()) == len(verdicts)
    every = (page.tables["submissions"])
    assert [row[0] for row in every] == [v["id"] for v in verdicts]
    assert [row[4] for row in every] == [str(len(root_causes(v))) if v["status"] != "error" else "" for v in verdicts]
    assert (page.tables["time"])[0][0] == str(len(verdicts))


SECTIONS = ["scores", "mistakes", "students", "checks", "ungradable", "not-graded", "run", "time"]


def test_the_page_leads_with_the_scores_and_the_mistakes_and_ends_with_the_run(tmp_path):
    """What an instructor acts on first: the distribution (mean, median, pass rate, a histogram) and the
    mistakes; then the students; the checks; and the sandbox and the times at the bottom."""
    page = Page(render(read_results(results_folder(tmp_path / "out"))))
    assert page.sections == SECTIONS
    scores = sorted(v["score"] for v in CLASS)
    text = " ".join(" ".join(page.text).split())
    mean = sum(scores) / len(scores)
    assert f"Mean {mean:g} of 4" in text and f"Median {(scores[3] + scores[4]) / 2:g} of 4" in text
    assert "Pass rate 12% (1 of 8)" in text


def test_one_of_anything_is_said_in_the_singular(tmp_path):
    text = " ".join("".join(Page(render(read_results(results_folder(
        tmp_path / "one", [verdict("ann", SHARED), verdict("fay", {}, error="SyntaxError at line 3")])))).text).split())
    assert "2 submissions: 0 passed" in text and "1 submission could not be graded" in text
    assert "1 submissions" not in text
    alone = " ".join("".join(Page(render(read_results(results_folder(tmp_path / "alone", [verdict("ann", SHARED)])))
                              ).text).split())
    assert "1 submission: 0 passed" in alone and "over the 1 submission that could" in alone
    assert "1 submissions" not in alone


# Two decoders: one without a causal mask, one with it transposed (triu for tril). Both fail the causal
# checks; the transposed mask also hides what must be seen, so the forward pass fails for a reason of its own.
CAUSAL = "Observed: changing only target positions {} and later changed the outputs, by up to {}.\nWhy it " \
         "matters: At generation time the decoder predicts each token from the earlier ones only."
NOT_CAUSAL = {"mask.causal": CAUSAL, "mask.lengths": "Observed: at other lengths the mask is not causal.\nWhy it "
              "matters: At generation time the decoder predicts each token from the earlier ones only.",
              "forward.decoder": "Observed: your output matches a layer whose self-attention is not causal.\nWhy "
                                 "it matters: At generation time the decoder predicts each token from the earlier "
                                 "ones only."}
TRANSPOSED = dict(NOT_CAUSAL, **{"forward.decoder": "Observed: your output differs from the correct layer by up "
                                                    "to {}.\nWhy it matters: each residual block adds a correction."})


def decoder(identity: str, messages: dict, *numbers) -> dict:
    statuses = {"api.output_shape": "passed", "mask.causal": "failed", "mask.lengths": "failed",
                "forward.decoder": "failed"}
    filled = {k: m.format(*numbers) if "{}" in m else m for k, m in messages.items()}
    return dict(verdict(identity, statuses, identity, messages=filled), exercise="exercise4")


def test_mistakes_that_fail_the_same_checks_for_other_reasons_stay_distinct(tmp_path):
    """Grouped by each cause's check and what it observed, not by the checks that failed: the seeds'
    numbers differ within a group, the observations between the groups."""
    students = [decoder("nick", NOT_CAUSAL, 2, 1.5), decoder("nora", NOT_CAUSAL, 3, 2.55),
                decoder("tom", TRANSPOSED, 3, 2.57, 1.2), decoder("tess", TRANSPOSED, 2, 1.5, 1.15)]
    mistakes = Page(render(read_results(results_folder(tmp_path / "out", students)))).tables["mistakes"]
    assert [(row[0], row[3]) for row in mistakes] == [("2", "nick, nora"), ("2", "tess, tom")]
    # no causal mask: one cause, as the report tells it; transposed: the forward pass is a cause of its own
    assert mistakes[0][1] == "mask.causal title of mask.causalalso fails mask.lengths, forward.decoder"
    assert mistakes[1][1] == "mask.causal title of mask.causalalso fails mask.lengthsforward.decoder title of " \
                             "forward.decoder"


def test_each_student_s_causes_and_first_problem_are_those_of_their_own_report(tmp_path):
    """The class page counts what each student's report says: "1 cause", and the check it starts with."""
    import io
    import re

    from rich.console import Console

    from grader.integrations.class_report import verdict_of
    from grader.report import render as report

    class_ = CLASS + [decoder("tom", TRANSPOSED, 3, 2.57, 1.2)]
    rows = {row[0]: row for row in Page(render(read_results(results_folder(tmp_path / "out", class_)))).tables[
        "submissions"]}
    for record in class_:
        console = Console(file=io.StringIO(), width=200, color_system=None)
        console.print(report(verdict_of(record)))
        said = console.file.getvalue()
        row = rows[record["id"]]
        if record["status"] == "error":
            assert row[4] == "" and row[5] == record["error"].splitlines()[0]
            continue
        causes = re.search(r"(\d+) causes?\b", said)
        assert row[4] == (causes.group(1) if causes else "0"), record["id"]
        start = re.search(r"Start with “([^”]*)” \(([a-z_.]+)\)", said)
        assert row[5] == (f"{start.group(2)}: {start.group(1)}" if start else ""), record["id"]
    assert rows["dan"][4] == "2" and rows["tom"][4] == "2" and rows["ben"][4] == "1"


ODD_IDS = ["a/b", "a_b", "..", ".", "../../outside", "ünïcødé", "Alice", "alice", "con", "x" * 300, NAME, "",
           os.fsdecode(b"caf\xe9"), "a_b-3d2f0c1e9b", "tab\there", "-rf"]


def test_every_student_gets_a_page_under_a_safe_name_of_its_own(tmp_path):
    import re

    names = page_names(ODD_IDS)
    assert set(names) == set(ODD_IDS)
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,80}", name) for name in names.values())
    assert len({name.casefold() for name in names.values()}) == len(ODD_IDS)
    assert names["Alice"] == "Alice" and names["alice"] != "alice"  # one name, whatever the file system's case
    assert names["a_b"] == "a_b" and names["con"] != "con" and names["a_b-3d2f0c1e9b"] == "a_b-3d2f0c1e9b"
    folder = results_folder(tmp_path / "out", [verdict(i, SHARED, i) for i in ODD_IDS])
    write_report(folder)
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert [p for p in written if p.parts[1] not in ("students",) and p.name not in (
        "report.html", "verdicts.jsonl", "summary.csv", "run.json")] == []
    assert len(list((folder / "students").iterdir())) == len(ODD_IDS)
    report = Page((folder / "report.html").read_text(encoding="utf-8"))
    links = {href for href, _ in report.links}
    assert links == {f"students/{name}.html" for name in names.values()}
    assert all((folder / href).is_file() for href in links)
    page = (folder / "students" / f"{names[NAME]}.html").read_text(encoding="utf-8")
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert Page(page).links == [("../report.html", "← the class report")]


def test_a_student_s_page_is_their_report_and_pages_of_students_gone_are_removed(tmp_path):
    folder = results_folder(tmp_path / "out")
    write_report(folder)
    ben = Page((folder / "students" / "ben.html").read_text(encoding="utf-8"))
    text = "".join(ben.text)
    assert "Score 2/4" in text and "weights.two_norms is wrong" in text and "1 cause" in text
    assert "Start with “title of weights.two_norms” (weights.two_norms)" in " ".join(text.split())
    fay = "".join(Page((folder / "students" / "fay.html").read_text(encoding="utf-8")).text)
    assert "Could not grade this submission" in fay and "SyntaxError at line 3" in fay
    (folder / "students" / "notes.txt").write_text("mine", encoding="utf-8")
    write_report(results_folder(folder, [v for v in CLASS if v["id"] != "ben"]))
    assert not (folder / "students" / "ben.html").exists() and (folder / "students" / "cat.html").exists()
    assert (folder / "students" / "notes.txt").exists()  # not a page the report wrote


def test_a_report_the_grader_cannot_draw_is_its_own_failure_on_that_page_alone(tmp_path, monkeypatch):
    from grader.integrations import class_report

    real = class_report.render_student

    def broken(record, exercise=""):
        if record["id"] == "ben":
            raise ZeroDivisionError("division by zero")
        return real(record, exercise)

    monkeypatch.setattr(class_report, "render_student", broken)
    folder = results_folder(tmp_path / "out")
    write_report(folder)
    ben = "".join(Page((folder / "students" / "ben.html").read_text(encoding="utf-8")).text)
    assert "The grader could not draw this report (ZeroDivisionError: division by zero)" in ben
    assert "Score 2/4" in "".join(Page((folder / "students" / "cat.html").read_text(encoding="utf-8")).text)
    assert (folder / "report.html").is_file()


def test_files_found_beside_the_submissions_are_listed(tmp_path):
    folder = results_folder(tmp_path / "out")
    manifest = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    manifest["not_graded"] = [{"path": "/class/notes.txt", "why": "not a .py or .ipynb file"},
                              {"path": "/class/<b>x</b>.md", "why": "not a .py or .ipynb file"}]
    (folder / "run.json").write_text(json.dumps(manifest), encoding="utf-8")
    page = Page(render(read_results(folder)))
    assert page.tables["not-graded"] == [["/class/notes.txt", "not a .py or .ipynb file"],
                                         ["/class/<b>x</b>.md", "not a .py or .ipynb file"]]
    assert "b" not in page.tags


def test_a_class_s_names_and_messages_are_shown_as_text_never_as_markup(tmp_path):
    text = render(read_results(results_folder(tmp_path / "out")))
    page = Page(text)
    assert "script" not in page.tags and "img" not in page.tags and "b" not in page.tags
    assert "<script" not in text.lower() and "<img" not in text.lower()
    shown = "".join(page.text)
    assert NAME in shown and "<b>bold</b><script>alert(2)</script>" in shown
    mistakes = (page.tables["mistakes"])
    students = next(row for row in mistakes if NAME in row[3])
    assert students[0] == "1"
    assert students[2] == HTML_MESSAGE


def test_the_page_fetches_nothing_and_runs_nothing(tmp_path):
    text = render(read_results(results_folder(tmp_path / "out")))
    assert "default-src 'none'" in text  # its Content-Security-Policy
    page = Page(text)
    assert not {"script", "link", "img", "iframe", "object", "embed", "base", "form"} & set(page.tags)
    assert "url(" not in text and "@import" not in text and "http://" not in text.replace(
        'xmlns="http://www.w3.org/2000/svg"', "")


def test_the_run_is_described(tmp_path):
    fresh = Page(render(read_results(results_folder(tmp_path / "fresh"))))
    assert "a fresh secret seed for each submission" in "".join(fresh.text)
    given = "".join(Page(render(read_results(results_folder(tmp_path / "given", seed=5)))).text)
    assert "5 (--seed, the same for every submission)" in given
    assert "0.1.0" in given and "Landlock ABI 7: writes only in its scratch folder" in given


def test_a_class_nobody_could_grade_and_an_empty_class_still_have_a_page(tmp_path):
    broken = render(read_results(results_folder(tmp_path / "broken", [v for v in CLASS if v["status"] == "error"])))
    assert "No submission could be graded, so no check ran." in broken
    empty = summarise(read_results(results_folder(tmp_path / "empty", [])))
    assert empty.rows == [] and empty.mistakes == [] and empty.ungradable == []
    assert "<!DOCTYPE html>" in render(read_results(tmp_path / "empty"))


def test_grade_class_report_rewrites_each_folder_s_report(tmp_path, capsys):
    one, two = results_folder(tmp_path / "one"), results_folder(tmp_path / "two", CLASS[:2])
    (one / "report.html").write_text("stale", encoding="utf-8")
    assert cli.main(["class-report", str(one), str(two)]) == 0
    assert len(Page((one / "report.html").read_text(encoding="utf-8")).tables["submissions"]) == len(CLASS)
    assert len(Page((two / "report.html").read_text(encoding="utf-8")).tables["submissions"]) == 2
    assert "8 submissions" in capsys.readouterr().out
    assert sorted(p.name for p in (one / "students").iterdir()) == sorted(f"{n}.html" for n in page_names(
        v["id"] for v in CLASS).values())


def test_a_file_name_that_is_not_utf8_is_written_escaped(tmp_path):
    from grader.integrations.class_report import write_report

    name = os.fsdecode(b"caf\xe9")  # Python keeps the byte as a surrogate
    folder = results_folder(tmp_path / "out", [verdict(name, SHARED), verdict("ok", ALL_PASS)])
    page = Path(write_report(folder)).read_text(encoding="utf-8")
    assert "caf\\xe9" in page
    assert [row[0] for row in Page(page).tables["submissions"]] == ["caf\\xe9", "ok"]


@pytest.mark.parametrize("make, said", [
    (lambda p: p, "does not exist"),
    (lambda p: (p.mkdir(), p)[1], "has no verdicts.jsonl"),
    (lambda p: (p.mkdir(), (p / "verdicts.jsonl").write_text("not json\n"), p)[2], "line 1, is not a verdict"),
])
def test_grade_class_report_refuses_a_folder_without_results(make, said, tmp_path, capsys):
    good = results_folder(tmp_path / "good")
    with pytest.raises(SystemExit) as exited:
        cli.main(["class-report", str(good), str(make(tmp_path / "bad"))])
    assert exited.value.code == 2
    assert said in capsys.readouterr().err
    assert not (good / "report.html").exists()  # nothing written unless every folder can be read


# --------------------------------------------------------------------------- in a browser

@pytest.fixture(scope="module")
def browser():
    from .system_packages import headless_chromium

    driver = headless_chromium("1100,1400", "open the report")
    yield driver
    driver.quit()


def requests_made(driver) -> list[str]:
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


@pytest.mark.parametrize("scheme", ["light", "dark", "print"])
def test_a_browser_draws_the_page_offline_with_no_error_and_no_request(browser, scheme, tmp_path):
    """In light and dark mode, and printed from a dark desktop (black on white): the sections in their
    order, and every student's link opens that student's page, which opens offline too."""
    folder = results_folder(tmp_path / "out")
    cli.main(["class-report", str(folder)])
    url = (folder / "report.html").as_uri()
    browser.get_log("browser"), browser.get_log("performance")  # forget what came before
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {
        "media": "print" if scheme == "print" else "",
        "features": [{"name": "prefers-color-scheme", "value": "light" if scheme == "light" else "dark"}]})
    browser.get(url)
    assert browser.title == "exercise3: class report"
    assert browser.execute_script("return Array.from(document.querySelectorAll('section')).map(s => s.id)") == SECTIONS
    tops = browser.execute_script(
        "return ['scores', 'mistakes', 'students'].map(id => document.getElementById(id).getBoundingClientRect().top)")
    assert tops == sorted(tops) and tops[1] < 1400  # the mistakes start above the fold
    bars = browser.execute_script(
        "return Array.from(document.querySelectorAll('svg rect.bar, svg rect.good, svg rect.bad'))"
        ".map(r => r.getBoundingClientRect()).filter(b => b.width > 0 && b.height > 0).length")
    charts = browser.execute_script("return document.querySelectorAll('svg').length")
    assert charts == 1 + 4 + 1  # the scores, one per topic, the times
    assert bars >= 5 + 4  # each score and pass rate above 0 is drawn
    background = browser.execute_script("return getComputedStyle(document.body).backgroundColor")
    dark = [int(part) for part in background[background.index("(") + 1:-1].split(",")[:3]]
    assert (sum(dark) < 100) == (scheme == "dark"), background
    assert not browser.execute_script("return document.querySelector('script')")
    assert browser.execute_script("return document.body.innerText").count(NAME) >= 2  # shown, as text
    errors = [entry for entry in browser.get_log("browser") if entry["level"] in ("SEVERE", "WARNING")]
    assert errors == []
    assert set(requests_made(browser)) == {url}  # the page itself, and nothing else
    shots = Path(os.environ.get("GRADE_REPORT_SCREENSHOTS", tmp_path))  # outside the repository unless set
    assert browser.save_screenshot(str(shots / f"class-report-{scheme}.png"))

    links = browser.execute_script(
        "return Array.from(document.querySelectorAll('#students a')).map(a => [a.href, a.textContent])")
    assert [text for _, text in links] == sorted(v["id"] for v in CLASS)
    for href, _ in links:
        assert href.startswith((folder / "students").as_uri() + "/") and Path(href[len("file://"):]).is_file()
    target = next(href for href, text in links if text == NAME)
    browser.find_element("link text", NAME).click()  # the first link to it: in the mistakes
    assert browser.current_url == target and browser.title == f"{NAME}: exercise3 report"
    text = browser.execute_script("return document.body.innerText")
    assert "Score 2/4" in text and "Could not grade" not in text
    assert not browser.execute_script("return document.querySelector('script, img')")
    assert [entry for entry in browser.get_log("browser") if entry["level"] in ("SEVERE", "WARNING")] == []
    assert set(requests_made(browser)) == {target}
    assert browser.save_screenshot(str(shots / f"student-report-{scheme}.png"))
    browser.find_element("link text", "← the class report").click()
    assert browser.current_url == url


def test_the_written_answer_is_named_as_a_maximum_and_only_for_an_nbgrader_class(tmp_path):
    """manual_points is the most a written answer graded by hand adds, the same for everyone: the class
    page of an nbgrader course names it as that, and a folder of .py files, which has no written
    answer, says nothing of it. A folder written before manual_max_points was a name still reads."""
    course = [dict(v, manual_max_points=2) for v in CLASS]
    text = " ".join(" ".join(Page(render(read_results(results_folder(tmp_path / "course", course)))).text).split())
    assert "Written answer, graded by hand in nbgrader: up to 2 points more, in no score here." in text
    older = " ".join(" ".join(Page(render(read_results(results_folder(tmp_path / "older")))).text).split())
    assert "up to 2 points more" in older
    files = [dict(v, student=None, manual_max_points=2) for v in CLASS]
    plain = render(read_results(results_folder(tmp_path / "files", files)))
    assert "Written answer" not in plain and "written-answer" not in plain


def stub_record(identity: str) -> dict:
    """The untouched stub's verdict as grade batch writes it: its constructor raises the stub's
    NotImplementedError, every other check is kept from running by it."""
    from grader.causes import STILL_THE_STUB

    crash = ("Your code raised NotImplementedError while being constructed:\n  NotImplementedError: \n"
             f"  at line 12, in __init__: raise NotImplementedError()\n{STILL_THE_STUB}")
    record = verdict(identity, {"api.output_shape": "failed"}, identity, messages={"api.output_shape": crash})
    later = "Not checked: your code failed earlier, while being constructed (see check api.output_shape)."
    record["checks"] += [check(i, "skipped", later) for i in ("weights.two_norms", "gradients.norms_differ",
                                                              "mask.padding")]
    return record


def test_the_untouched_stub_is_not_attempted_not_a_mistake(tmp_path):
    """A student who handed in the stub made no mistake: the class page lists them as not attempted,
    by the grader's own sign of the stub (its NotImplementedError, told as "still the stub"); a stub
    with one part written, or a crash of the student's own, is still a mistake."""
    from grader.causes import NOT_ATTEMPTED, first_problem
    from grader.integrations.class_report import verdict_of

    own_crash = stub_record("pat")
    own_crash["checks"][0]["message"] = own_crash["checks"][0]["message"].split("\nThis part")[0]
    part_written = stub_record("quin")
    part_written["checks"][1].update(status="passed", points=1.0, message="")
    page = Page(render(read_results(results_folder(tmp_path / "out", CLASS + [stub_record("ivy"), own_crash,
                                                                               part_written]))))
    mistakes = page.tables["mistakes"]
    assert "ivy" not in " ".join(row[3] for row in mistakes)
    assert "pat" in " ".join(row[3] for row in mistakes) and "quin" in " ".join(row[3] for row in mistakes)
    rows = {row[0]: row for row in page.tables["submissions"]}
    assert rows["ivy"][2] == "not attempted" and rows["ivy"][5] == NOT_ATTEMPTED
    assert rows["pat"][2] == rows["quin"][2] == "failed"
    text = " ".join(" ".join(page.text).split())
    assert "Not attempted (1 student): the file is still the stub" in text
    assert "(1 of them not attempted: still the stub)" in text
    # the batch's table in the terminal tells the first problem by the same rule
    assert first_problem(verdict_of(stub_record("ivy"))) == NOT_ATTEMPTED
    assert first_problem(verdict_of(own_crash)) == "api.output_shape: title of api.output_shape"
