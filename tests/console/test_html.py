"""The console's HTML building blocks: escaping by construction, paging, charts."""

from odradek.console.html import (
    Html,
    esc,
    html,
    join,
    line_chart,
    pager,
    paginate,
    size,
    table,
    timestamp,
    url,
)


def test_arguments_are_escaped_and_html_is_not():
    evil = '<script>alert("x")</script>&'
    out = html("<td>{}</td><td>{}</td>", evil, Html("<b>ok</b>"))
    assert "<script>" not in out
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;" in out
    assert "<b>ok</b>" in out
    assert isinstance(out, Html)


def test_attribute_values_cannot_break_out():
    out = html('<a href="{}" title="{}">x</a>', 'x" onmouseover="alert(1)', "it's")
    assert 'onmouseover="alert' not in out
    assert "&quot; onmouseover=&quot;" in out and "it&#x27;s" in out


def test_template_braces_in_arguments_are_not_formatted_again():
    assert html("<p>{}</p>", "{0} {x}") == "<p>{0} {x}</p>"


def test_tables_escape_cells_and_join_escapes_parts():
    out = table(["a<b"], [["<i>", Html("<u>safe</u>")], [None, 3]])
    assert "a&lt;b" in out and "&lt;i&gt;" in out and "<u>safe</u>" in out
    assert join(["<", Html("<br>")]) == "&lt;<br>"
    assert "none" in table(["x"], [])
    assert esc(None) == ""


def test_urls_encode_query_values():
    assert url("/group", id="a&b=c d", page=None) == "/group?id=a%26b%3Dc+d"
    assert url("/x") == "/x"


def test_paging_clamps_and_counts():
    items = list(range(10_001))
    page = paginate(items, "3", 100)
    assert page.items == list(range(200, 300)) and page.pages == 101
    assert paginate(items, "999", 100).number == 101
    assert paginate(items, "junk", 100).number == 1
    assert paginate([], None, 100).pages == 1
    text = pager(page, "/topics", {"q": "a<b"}, "topics")
    assert "topics 201–300 of 10,001" in text
    assert "page=2" in text and "page=4" in text and "q=a%3Cb" in text


def test_chart_needs_two_times_and_escapes_names():
    assert "collecting samples" in line_chart([("x", [(1.0, 5.0)])], unit="r/s")
    svg = line_chart([("<lag>", [(0.0, 0.0), (5.0, 10.0), (10.0, 4.0)]), ("b", [(0.0, 1.0), (10.0, 2.0)])],
                     unit="records")
    assert svg.count("<polyline") == 2
    assert "&lt;lag&gt;" in svg and "<lag>" not in svg
    assert "last 10 s" in svg


def test_sizes_and_times():
    assert size(0) == "0 B" and size(1536) == "1.5 KiB" and size(None) == "–" and size(-1) == "–"
    assert timestamp(0) == "1970-01-01 00:00:00.000Z" and timestamp(-1) == "–"


def test_url_takes_a_query_parameter_named_path():
    assert url("/topics/t/messages", path="$.a == 1") == "/topics/t/messages?path=%24.a+%3D%3D+1"
