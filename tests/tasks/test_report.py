"""Reports: the table, the plots and the HTML page (opened in headless Chromium)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile

import pytest
from stateflow.tasks.harness.runner import RunSpec, evaluate
from stateflow.tasks.sql.benchmark import INTERCODE_SQL
from stateflow.tasks.ui.static_report import write_report

from tests.tasks.test_runner import ORACLE_SPEC

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
]


@pytest.fixture(scope="module")
def records(tmp_path_factory, sql_available):
    out = tmp_path_factory.mktemp("run")
    spec = RunSpec(INTERCODE_SQL, ("stateflow", "sf_agent"), out=out, tasks="0:3", **ORACLE_SPEC)
    return evaluate(spec, progress=False).records


def test_report_files(tmp_path, records):
    paths = write_report(records, tmp_path)
    for key in ("html", "metrics", "success_vs_cost", "tokens_by_state"):
        assert paths[key].exists() and paths[key].stat().st_size > 0
    assert paths["success_vs_cost"].read_bytes()[:4] == b"\x89PNG"
    html = paths["html"].read_text()
    assert "intercode-sql / sf_agent / oracle" in html and "<svg" in html
    assert "http://" not in html.replace("http://www.w3.org", "")  # self-contained: nothing to fetch


def test_report_html_has_an_interval_column_beside_every_success_rate(tmp_path, records):
    """The cells table: a `95 % CI (Wilson)` column right after `success %`, one interval per row
    (3 of 3 solved: Wilson 43.9-100.0)."""
    import re

    from stateflow.tasks.kit.stats import wilson_interval

    html = write_report(records, tmp_path)["html"].read_text()
    head = re.search(r"<th>success %</th><th>([^<]*)</th>", html)
    assert head is not None and head.group(1) == "95 % CI (Wilson)"
    rates = re.findall(r'<td class="num sr">([^<]*)</td>\s*<td class="num ci">([^<]*)</td>', html)
    assert rates == [("100.0", wilson_interval(3, 3).text())] * 2


def test_success_plot_draws_each_rows_interval_as_a_whisker(records):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from stateflow.tasks.kit.stats import wilson_interval
    from stateflow.tasks.reports.metrics import summarize
    from stateflow.tasks.reports.report import plot_success

    fig, ax = plt.subplots()
    plot_success(ax, summarize(records))
    spans = sorted(tuple(round(float(v), 1) for v in line.get_ydata()) for line in ax.lines)
    ci = wilson_interval(3, 3)
    assert spans == [(round(ci.low, 1), round(ci.high, 1))] * 2
    plt.close(fig)


def test_html_report_opens_in_chromium_without_console_errors(tmp_path, records):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Chromium is not installed (scripts/setup.sh installs it)")
    page = write_report(records, tmp_path)["html"]
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert proc.returncode == 0, proc.stderr[-1000:]
    console = [line for line in proc.stderr.splitlines() if "CONSOLE" in line]
    assert console == []
    dom = proc.stdout
    assert 'data-ready="yes"' in dom  # the page's script ran to the end
    assert 'class="ep ok sel"' in dom  # the first episode of a group is selected...
    assert 'class="node visited"' in dom  # ...and its path is highlighted on the state graph
    assert dom.count('class="epdetail"') == 2  # one episode's detail shown per group, the others hidden


def test_labels_of_crowded_points_do_not_cover_one_another():
    """Four methods at nearly one place (an ablation and its flow at 0 %) get readable labels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from stateflow.tasks.reports.report import label_apart

    fig, ax = plt.subplots(figsize=(6, 4.2))
    points = [(19600, 0.0), (19800, 0.0), (20400, 0.0), (21300, 0.0), (14000, 4.0), (300, 39.0)]
    labels = ["stateflow", "stateflow_no_verify", "stateflow_no_error", "stateflow_no_observe", "react", "vote"]
    markers = [ax.scatter([x], [y], s=60) for x, y in points]
    ax.set_xlim(-1000, 23000)
    ax.set_ylim(-3, 103)
    label_apart(ax, points, labels, markers=markers)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = [t for t in ax.texts if t.get_text() in labels]
    assert sorted(t.get_text() for t in texts) == sorted(labels)
    boxes = [t.get_window_extent(renderer) for t in texts]
    overlapping = [
        (texts[i].get_text(), texts[j].get_text())
        for i in range(len(boxes))
        for j in range(i + 1, len(boxes))
        if boxes[i].overlaps(boxes[j])
    ]
    assert overlapping == []
    # no label covers a marker (its centre)
    centres = [ax.transData.transform(p) for p in points]
    assert [
        (t.get_text(), i) for t in texts for i, c in enumerate(centres) if t.get_window_extent(renderer).contains(*c)
    ] == []
    # each label has its marker's colour
    by_text = {t.get_text(): t.get_color() for t in texts}
    assert [tuple(by_text[label]) for label in labels] == [tuple(m.get_facecolor()[0]) for m in markers]
    plt.close(fig)


def test_plot_success_draws_each_point_in_the_style_given_and_refuses_a_style_list_that_does_not_fit():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgba
    from matplotlib.markers import MarkerStyle
    from stateflow.tasks.reports.metrics import summarize
    from stateflow.tasks.reports.report import PointStyle, plot_success

    from tests.tasks.test_paper import _record

    recs = [_record("react", 0, True), _record("stateflow", 0, False)]
    rows = summarize(recs, ("method",))
    fig, ax = plt.subplots()
    styles = [PointStyle("tab:red", "^"), PointStyle("tab:green", "D")]
    plot_success(ax, rows, x="p_tokens", styles=styles)
    for point, style in zip(ax.collections, styles, strict=True):
        assert tuple(point.get_facecolor()[0]) == to_rgba(style.color)
        shape = MarkerStyle(style.marker)
        assert (point.get_paths()[0].vertices == shape.get_path().transformed(shape.get_transform()).vertices).all()
    with pytest.raises(ValueError, match="1 styles for 2 rows"):
        plot_success(ax, rows, styles=[PointStyle()])
    plt.close(fig)


def test_tokens_by_state_keeps_a_state_colour_across_panels_and_the_bars_in_the_order_given():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgba
    from stateflow.tasks.reports.report import plot_tokens_by_state

    colors = {"Plan": "tab:pink", "Solve": "tab:gray"}
    fig, (left, right) = plt.subplots(1, 2)
    per_state = {("b",): {"Solve": {"prompt": 5, "completion": 1}}, ("a",): {"Plan": {"prompt": 3, "completion": 1}}}
    plot_tokens_by_state(left, per_state, state_colors=colors, order=[("b",), ("z",)])
    # the other panel has only Solve, which by matplotlib's cycle would take the first colour
    plot_tokens_by_state(right, {("a",): {"Solve": {"prompt": 2, "completion": 0}}}, state_colors=colors)
    for ax in (left, right):
        for bars in ax.containers:
            assert all(p.get_facecolor() == to_rgba(colors[bars.get_label()]) for p in bars.patches)
    assert [t.get_text() for t in left.get_xticklabels()] == ["b", "a"]  # given first, then the rest sorted
    plt.close(fig)


def test_tokens_by_state_legend_keeps_the_states_of_each_flow_apart():
    """Regression (issue 47): one legend listed every flow's states together."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from stateflow.tasks.reports.report import plot_tokens_by_state

    def use(*states):
        return {s: {"prompt": 10, "completion": 1} for s in states}

    per_state = {
        ("react",): use("Act"),
        ("stateflow",): use("Observe", "Solve"),
        ("sf_agent",): use("Observe", "Solve"),
    }
    fig, ax = plt.subplots()
    plot_tokens_by_state(ax, per_state)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["react:", "  Act", "sf_agent, stateflow:", "  Observe", "  Solve"]
    fig2, ax2 = plt.subplots()
    plot_tokens_by_state(ax2, {("a",): use("Solve"), ("b",): use("Solve")})
    assert [t.get_text() for t in ax2.get_legend().get_texts()] == ["Solve"]  # one flow: no headings
    plt.close(fig)
    plt.close(fig2)
