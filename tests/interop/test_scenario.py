"""Self-tests of the scenario checks: each kind of corruption must be reported, so a broker bug
cannot pass the suite because a check is blind. Run: python3 -m unittest test_scenario"""

import copy
import unittest

import scenario as sc


def clean(n=60, partitions=6):
    records = sc.make_dataset("t", n, partitions, 1_700_000_000_000)
    per_part = {}
    consumed = []
    for r in records:
        off = per_part.get(r.partition, 0)
        per_part[r.partition] = off + 1
        consumed.append(
            sc.Consumed(r.partition, off, r.timestamp_ms, "create", r.key, r.value, list(r.headers))
        )
    consumed.sort(key=lambda c: (c.partition, c.offset))
    return records, consumed, sc.Expectations(partitions)


class VerifyTest(unittest.TestCase):
    def assert_caught(self, mutate, fragment):
        records, consumed, exp = clean()
        consumed = copy.deepcopy(consumed)
        mutate(consumed)
        problems = sc.verify(records, consumed, exp)
        self.assertTrue(any(fragment in p for p in problems), problems)

    def test_clean_passes(self):
        records, consumed, exp = clean()
        self.assertEqual(sc.verify(records, consumed, exp), [])

    def test_missing_record(self):
        self.assert_caught(lambda c: c.pop(), "never consumed")

    def test_duplicate(self):
        self.assert_caught(lambda c: c.append(copy.deepcopy(c[0])), "duplicate")

    def test_swapped_order(self):
        def swap(c):
            c[0].key, c[1].key = c[1].key, c[0].key
            c[0].value, c[1].value = c[1].value, c[0].value
            c[0].headers, c[1].headers = c[1].headers, c[0].headers
            c[0].timestamp_ms, c[1].timestamp_ms = c[1].timestamp_ms, c[0].timestamp_ms
        self.assert_caught(swap, "out of produce order")

    def test_offset_gap(self):
        self.assert_caught(lambda c: setattr(c[3], "offset", 7), "offsets not")

    def test_value(self):
        self.assert_caught(lambda c: setattr(c[5], "value", b"x"), "value mismatch")

    def test_header(self):
        self.assert_caught(lambda c: c[5].headers.pop(), "headers")

    def test_timestamp(self):
        self.assert_caught(lambda c: setattr(c[5], "timestamp_ms", 1), "timestamp 1 !=")

    def test_timestamp_type(self):
        self.assert_caught(lambda c: setattr(c[5], "tstype", "append"), "timestamp type")

    def test_wrong_partition(self):
        self.assert_caught(lambda c: setattr(c[-1], "partition", 0), "expected 5")


class OffsetsTest(unittest.TestCase):
    def test_queries_cover_hit_between_before_after(self):
        _, consumed, _ = clean()
        queries = sc.offset_queries(consumed, 6)
        self.assertEqual(len(queries), 24)
        mid = sorted(c.timestamp_ms for c in consumed)[30]
        hits = {(p, w) for p, ts, w in queries if ts == mid}
        self.assertIn((0, 5), hits)  # record 30 is partition 0, offset 5
        self.assertIn((1, 5), hits)  # partition 1's offset 5 (record 31) is the next one
        self.assertTrue(all(w == 0 for p, ts, w in queries if ts < mid - 1000))
        self.assertTrue(all(w == -1 for p, ts, w in queries if ts > mid + 1000))

    def test_check_answers(self):
        q = [(0, 10, 3)]
        self.assertEqual(sc.check_answers(q, [(0, 10, 3)]), [])
        self.assertTrue(sc.check_answers(q, [(0, 10, 4)]))
        self.assertTrue(sc.check_answers(q, []))

    def test_check_committed(self):
        ends = {0: 5, 1: 0, 2: 7}
        self.assertEqual(sc.check_committed(ends, {0: 5, 2: 7}), [])
        self.assertEqual(sc.check_committed(ends, {0: 5, 1: -1001, 2: 7}), [])
        self.assertEqual(len(sc.check_committed(ends, {0: 4, 2: 7})), 1)
        self.assertEqual(len(sc.check_committed(ends, {0: 5})), 1)
        self.assertEqual(len(sc.check_committed(ends, {0: 5, 2: 7, 9: 1})), 1)


class FormatTest(unittest.TestCase):
    def test_murmur2_matches_kafka_vectors(self):
        # Vectors from Kafka's UtilsTest.testMurmur2.
        self.assertEqual(sc.murmur2(b"21"), -973932308)
        self.assertEqual(sc.murmur2(b"foobar"), -790332482)
        self.assertEqual(sc.murmur2(b"a-little-bit-long-string"), -985981536)
        self.assertEqual(sc.murmur2(b"a-little-bit-longer-string"), -1486304829)
        self.assertEqual(sc.murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"), -58897971)
        self.assertEqual(sc.murmur2(b"abc"), 479470107)

    def test_round_trip(self):
        import tempfile, os
        records, consumed, _ = clean(12)
        with tempfile.TemporaryDirectory() as d:
            sc.write_records(os.path.join(d, "r"), records)
            self.assertEqual(sc.read_records(os.path.join(d, "r")), records)
            consumed[0].key = None
            sc.write_consumed(os.path.join(d, "c"), consumed)
            self.assertEqual(sc.read_consumed(os.path.join(d, "c")), consumed)


if __name__ == "__main__":
    unittest.main()
