"""The message browser's pure parts: filters, JSON paths, how values are shown, positions, bounded paged scans."""

import json

import pytest

from odradek.console.messages import (
    MAX_SHOWN_BYTES,
    JsonPredicate,
    Record,
    RecordFilter,
    Window,
    format_positions,
    hexdump,
    parse_positions,
    scan,
    show,
)


def record(partition, offset, value=b"", key=None, timestamp=None, headers=()):
    return Record(partition, offset, offset if timestamp is None else timestamp, key, value, tuple(headers))


# ---------------------------------------------------------------------------------------------------
# Filters


def test_substring_filter_looks_in_the_chosen_field_case_insensitively():
    r = record(0, 1, b"Hello World", key=b"user-7", headers=[("trace", b"abc-XYZ")])
    assert RecordFilter.parse("world").matches(r)
    assert RecordFilter.parse("USER-7", "key").matches(r)
    assert not RecordFilter.parse("user-7", "value").matches(r)
    assert RecordFilter.parse("xyz", "headers").matches(r)
    assert RecordFilter.parse("trace", "headers").matches(r)  # a header's name counts too
    assert not RecordFilter.parse("nothing").matches(r)


def test_filters_take_null_keys_values_and_binary_data():
    assert not RecordFilter.parse("x").matches(record(0, 1, None))
    assert RecordFilter.parse("ok").matches(record(0, 1, b"\xff\xfeok"))


def test_an_empty_filter_matches_everything_and_is_inactive():
    f = RecordFilter.parse("", "any", "  ")
    assert not f.active
    assert f.matches(record(0, 0, None))


def test_unknown_filter_field_is_refused():
    with pytest.raises(ValueError):
        RecordFilter.parse("x", "nowhere")


# ---------------------------------------------------------------------------------------------------
# JSON paths


DOC = {"user": {"id": 42, "name": "Ada", "tags": ["a", "b"]}, "items": [{"sku": "x1", "qty": 2},
                                                                       {"sku": "y2", "qty": 5}],
       "ok": True, "none": None, "odd key": "v", "n": 1.5}


@pytest.mark.parametrize("expression, expected", [
    ("$.user.id", True),
    ("$.user.missing", False),
    ("$.none", True),  # exists, though null
    ("$.user.id == 42", True),
    ("$.user.id == 42.0", True),
    ("$.user.id == '42'", False),  # a string is not the number
    ('$.user.name == "Ada"', True),
    ("$.user.name == Ada", True),  # a bare word is text
    ("$.user.name != Ada", False),
    ("$.user.tags[0] == a", True),
    ("$.user.tags[-1] == b", True),
    ("$.user.tags[5]", False),
    ("$.items[*].sku == y2", True),
    ("$.items[*].qty > 4", True),
    ("$.items[*].qty > 5", False),
    ("$.items[1].qty <= 5", True),
    ("$.user.* ~= ad", True),
    ("$['odd key'] == v", True),
    ("$.ok == true", True),
    ("$.ok == 1", False),  # JSON true is not 1
    ("$.n >= 1.5", True),
    ("$.user.name > Ab", True),  # strings compare as strings
    ("$.user.id > abc", False),  # a number and a string do not compare
    ("$", True),
])
def test_json_path_predicates(expression, expected):
    assert JsonPredicate.parse(expression).test(DOC) is expected


@pytest.mark.parametrize("bad", ["user.id", "$.", "$.a[", "$.a[x]", "$.a ==", "$.a = 3", "$.a > {}"])
def test_bad_json_paths_say_why(bad):
    with pytest.raises(ValueError):
        JsonPredicate.parse(bad)


def test_json_path_filter_skips_values_that_are_not_json():
    f = RecordFilter.parse(json_path="$.id == 1")
    assert f.matches(record(0, 0, json.dumps({"id": 1}).encode()))
    assert not f.matches(record(0, 1, b"not json"))
    assert not f.matches(record(0, 2, None))
    assert not f.matches(record(0, 3, b"\xff"))


def test_text_and_json_path_must_both_match():
    f = RecordFilter.parse("vip", "key", "$.total > 100")
    assert f.matches(record(0, 0, b'{"total": 120}', key=b"vip-1"))
    assert not f.matches(record(0, 1, b'{"total": 80}', key=b"vip-1"))
    assert not f.matches(record(0, 2, b'{"total": 120}', key=b"plain"))
    assert "key contains" in f.describe() and "$.total > 100" in f.describe()


# ---------------------------------------------------------------------------------------------------
# Showing values


def test_auto_format_picks_json_text_or_hex():
    assert show(b'{"a":1}').format == "json"
    assert show(b'{"a":1}').text == '{\n  "a": 1\n}'
    assert show(b"plain words").format == "text"
    assert show(b"{not json").format == "text"
    assert show(b"\x00\x01binary").format == "hex"
    assert show(b"\xff\xfe").format == "hex"
    assert show(None).format == "null"


def test_forced_formats():
    assert show(b"hi", "hex").text.startswith("00000000  68 69")
    assert show(b"nope", "json").note == "not JSON; shown as text"
    assert show(b'["x"]', "text").text == '["x"]'


def test_hexdump_lines_show_offsets_bytes_and_ascii():
    lines = hexdump(bytes(range(40))).splitlines()
    assert len(lines) == 3
    assert lines[1].startswith("00000010  10 11 12")
    assert lines[2].endswith("| !\"#$%&'|")


def test_long_values_are_cut_and_say_so():
    value = b"x" * (MAX_SHOWN_BYTES + 500)
    shown = show(value)
    assert len(shown.text) == MAX_SHOWN_BYTES
    assert f"{len(value):,}" in shown.note
    kept = record(0, 0, value).cut()
    assert len(kept.value) == MAX_SHOWN_BYTES + 1 and kept.value_size == len(value)
    assert f"{len(value):,}" in show(kept.value, "auto", kept.value_size).note


# ---------------------------------------------------------------------------------------------------
# Positions


def test_positions_round_trip_and_refuse_junk():
    assert parse_positions(format_positions({3: 77, 0: 120})) == {0: 120, 3: 77}
    assert format_positions({3: 77, 0: 120}) == "0:120,3:77"
    assert parse_positions("") == {}
    for bad in ("x", "0:", "0:-1", "a:1", "0=1"):
        with pytest.raises(ValueError):
            parse_positions(bad)


# ---------------------------------------------------------------------------------------------------
# Scans


class Log:
    """Partitions as lists of records, read the way the console's consumer reads windows."""

    def __init__(self, partitions: dict[int, list[Record]]):
        self.partitions = partitions
        self.reads: list[dict[int, Window]] = []

    def bounds(self):
        return {p: (rs[0].offset if rs else 0, rs[-1].offset + 1 if rs else 0) for p, rs in self.partitions.items()}

    def read(self, windows):
        self.reads.append(dict(windows))
        return {p: [r for r in self.partitions[p] if w.start <= r.offset < w.end] for p, w in windows.items()}

    def offsets_read(self) -> int:
        return sum(w.span for round_ in self.reads for w in round_.values())


def one_partition(n, value=lambda i: f"v{i}".encode()):
    return Log({0: [record(0, i, value(i)) for i in range(n)]})


def test_newest_first_page_reads_exactly_one_page_without_a_filter():
    log = one_partition(1000)
    result = scan(log.read, log.bounds(), {}, newest_first=True, page_size=20)
    assert [r.offset for r in result.records] == list(range(999, 979, -1))
    assert result.positions == {0: 980} and result.more
    assert log.offsets_read() == 20


def test_pages_follow_one_another_without_gaps_or_repeats():
    log = one_partition(95)
    seen, start = [], {}
    while True:
        result = scan(log.read, log.bounds(), start, newest_first=True, page_size=20)
        seen += [r.offset for r in result.records]
        if not result.more:
            break
        start = result.positions
    assert seen == list(range(94, -1, -1))


def test_oldest_first_from_an_offset():
    log = one_partition(100)
    result = scan(log.read, log.bounds(), {0: 40}, newest_first=False, page_size=10)
    assert [r.offset for r in result.records] == list(range(40, 50))
    assert result.positions == {0: 50}


def test_filtered_scan_stops_at_the_budget_and_says_so():
    log = one_partition(100_000, value=lambda i: b"needle" if i % 10_000 == 5 else b"hay")
    result = scan(log.read, log.bounds(), {}, newest_first=True, page_size=10,
                  record_filter=RecordFilter.parse("needle"), budget=25_000)
    assert log.offsets_read() <= 10 + 25_000
    assert [r.offset for r in result.records] == [90_005, 80_005]  # 70_005 lies beyond the budget
    assert result.budget_exhausted and result.more
    assert result.positions == {0: 100_000 - 25_010}
    # going on from where it stopped finds the older ones
    log.reads.clear()
    rest = scan(log.read, log.bounds(), result.positions, newest_first=True, page_size=10,
                record_filter=RecordFilter.parse("needle"), budget=25_000)
    assert [r.offset for r in rest.records] == [70_005, 60_005, 50_005]
    assert log.offsets_read() <= 10 + 25_000


def test_filtered_scan_that_reaches_the_start_is_not_a_budget_problem():
    log = one_partition(50, value=lambda i: b"yes" if i == 3 else b"no")
    result = scan(log.read, log.bounds(), {}, newest_first=True, page_size=10,
                  record_filter=RecordFilter.parse("yes"), budget=1000)
    assert [r.offset for r in result.records] == [3]
    assert not result.budget_exhausted and not result.more


def test_partitions_merge_newest_first_by_timestamp_and_resume_where_the_page_ended():
    log = Log({0: [record(0, i, b"a", timestamp=100 + 2 * i) for i in range(10)],
               1: [record(1, i, b"b", timestamp=101 + 2 * i) for i in range(10)]})
    first = scan(log.read, log.bounds(), {}, newest_first=True, page_size=6)
    assert [(r.partition, r.offset) for r in first.records] == [(1, 9), (0, 9), (1, 8), (0, 8), (1, 7), (0, 7)]
    second = scan(log.read, log.bounds(), first.positions, newest_first=True, page_size=6)
    assert [(r.partition, r.offset) for r in second.records] == [(1, 6), (0, 6), (1, 5), (0, 5), (1, 4), (0, 4)]


def test_matches_that_do_not_fit_the_page_are_read_again_next_time():
    log = Log({0: [record(0, i, b"x", timestamp=1000 - i) for i in range(30)],  # old timestamps, high offsets
               1: [record(1, i, b"x", timestamp=5000 + i) for i in range(30)]})
    seen = []
    start = {}
    for _ in range(20):
        result = scan(log.read, log.bounds(), start, newest_first=False, page_size=7,
                      record_filter=RecordFilter.parse("x"), budget=100)
        seen += [(r.partition, r.offset) for r in result.records]
        if not result.more:
            break
        start = result.positions
    assert sorted(seen) == sorted({(p, i) for p in (0, 1) for i in range(30)})
    assert len(seen) == 60


def test_gaps_in_offsets_compacted_or_markers_are_fine():
    log = Log({0: [record(0, o, b"v") for o in (0, 1, 5, 9, 10, 30)]})
    result = scan(log.read, {0: (0, 31)}, {}, newest_first=True, page_size=4)
    assert [r.offset for r in result.records] == [30]  # the page's window was 27..30: only offset 30 is in it
    assert result.more and result.positions == {0: 27}


def test_empty_and_unknown_bounds():
    log = Log({0: []})
    result = scan(log.read, {0: (5, 5)}, {}, newest_first=True, page_size=10)
    assert result.records == [] and not result.more and log.reads == []
    result = scan(log.read, {0: (5, 8)}, {0: 99}, newest_first=False, page_size=10)  # past the end: clamped
    assert result.positions == {0: 8} and not result.more


def test_never_more_than_page_plus_budget_across_many_partitions():
    log = Log({p: [record(p, i, b"z") for i in range(500)] for p in range(40)})
    scan(log.read, log.bounds(), {}, newest_first=True, page_size=25, record_filter=RecordFilter.parse("nope"),
         budget=300)
    assert log.offsets_read() <= 325
