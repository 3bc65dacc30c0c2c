"""The terminal summaries: units on every number, and tables that fit a piped terminal."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from sim2real.report import Report, Validation
from sim2real.report._words import TAXONOMY_LABELS
from sim2real.report.console import print_report, print_validation


def _printed(show: object, result: object) -> str:
    buffer = io.StringIO()
    show(result, Path("out"), Console(file=buffer, width=80))  # type: ignore[operator]
    return buffer.getvalue()


def test_report_table_fits_80_columns_with_whole_words(report: Report) -> None:
    text = _printed(print_report, report)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text
    for c in report.model.clusters:
        for word in TAXONOMY_LABELS[c.taxonomy].split():
            assert word in text
    assert "deployment" in text and "×" in text and "%" in text  # growth and confidence: units


def test_validation_table_fits_80_columns_with_whole_words(validation: Validation) -> None:
    text = _printed(print_validation, validation)
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text and "failures / real episodes" in text
    for c in validation.model.clusters:
        assert f"{c.baseline.failures} / {c.baseline.episodes}" in text


def test_wide_content_still_fits(validation: Validation) -> None:
    data = validation.model.model_dump(mode="json")
    for c in data["clusters"]:
        c["taxonomy"], c["verdict"] = "deployment_system_noise", "unchanged"
        c["baseline"] |= {"episodes": 15260, "failures": 9612, "rate": 0.6299}
        c["candidate"] |= {"episodes": 6350, "failures": 9300, "rate": 1.4646}
        c["rate_ratio"], c["ci_low"], c["ci_high"] = 2.3251, 1.7314, 3.1291
    text = _printed(print_validation, Validation(type(validation.model).model_validate(data)))
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "…" not in text and text.count("unchanged") == len(data["clusters"])


def test_counts_agree_with_their_nouns(report: Report) -> None:
    data = report.model.model_dump(mode="json")
    one = data["clusters"][0]
    data["clusters"] = [one]
    data["events"] = [{**e, "cluster_id": None if i == 0 else one["cluster_id"]}
                      for i, e in enumerate(data["events"][:2])]
    data["dataset"]["failures"] = 2
    model = type(report.model).model_validate(data)
    text = _printed(print_report, Report(model, report.signatures, report.traces))
    assert "2 real failures, 1 cluster (" in text
    assert "1 failure fits no cluster" in text


def test_targets_are_starred_and_the_star_explained(validation: Validation) -> None:
    first = validation.model.clusters[0].cluster_id
    targeted = Validation(validation.model.model_copy(update={"targets": [first]}))
    text = _printed(print_validation, targeted)
    assert f"{first} *" in text and "* a target of the fix" in text
    assert "* a target" not in _printed(print_validation, validation)
