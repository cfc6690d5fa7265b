// Package scen is the Go side of tests/interop/scenario.py: the client programs' command line
// and the plain-text files they share with the driver (records, consumed, queries, answers).
// The checks themselves stay in scenario.py; only the consume-group step's committed-offsets
// check lives here too, because the program must fail when it does not hold.
package scen

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Args mirrors scenario.parse_client_args:
// create|produce|consume|consume-group|offsets --bootstrap B --topic T [--partitions N]
// [--input F] [--output F] [--compression CODEC] [--group G] [--timeout-s S].
type Args struct {
	Step, Bootstrap, Topic, Input, Output, Compression, Group string
	Partitions                                                int
	Timeout                                                   time.Duration
}

// ParseArgs reads os.Args; it exits with status 2 on a malformed command line.
func ParseArgs() Args {
	a := Args{Partitions: 6, Compression: "none", Timeout: 60 * time.Second}
	argv := os.Args[1:]
	if len(argv) < 1 {
		Die("usage: %s create|produce|consume|consume-group|offsets --bootstrap B --topic T ...", os.Args[0])
	}
	a.Step = argv[0]
	for i := 1; i < len(argv); i += 2 {
		if i+1 >= len(argv) {
			Die("option %s without a value", argv[i])
		}
		v := argv[i+1]
		switch argv[i] {
		case "--bootstrap":
			a.Bootstrap = v
		case "--topic":
			a.Topic = v
		case "--partitions":
			a.Partitions = atoi(v)
		case "--input":
			a.Input = v
		case "--output":
			a.Output = v
		case "--compression":
			a.Compression = v
		case "--group":
			a.Group = v
		case "--timeout-s":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				Die("bad --timeout-s %q", v)
			}
			a.Timeout = time.Duration(f * float64(time.Second))
		default:
			Die("unknown option %s", argv[i])
		}
	}
	if a.Bootstrap == "" || a.Topic == "" {
		Die("--bootstrap and --topic are required")
	}
	return a
}

// Die prints to stderr and exits 1, like the other client programs' failures.
func Die(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		Die("not a number: %q", s)
	}
	return n
}

func atoi64(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		Die("not a number: %q", s)
	}
	return n
}

func unb64(s string) []byte {
	if s == "~" {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		Die("bad base64 %q: %v", s, err)
	}
	return b
}

func b64(b []byte) string {
	if b == nil {
		return "~"
	}
	return base64.StdEncoding.EncodeToString(b)
}

// Header is one record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is one line of the records file; Partition / TimestampMs are -1 for "the client's own".
type Record struct {
	Idx         int
	Partition   int32
	TimestampMs int64
	Key, Value  []byte
	Headers     []Header
}

func readLines(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		Die("%v", err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// ReadRecords reads the records file (scenario.write_records).
func ReadRecords(path string) []Record {
	var out []Record
	for _, line := range readLines(path) {
		f := strings.Split(line, "\t")
		if len(f) != 6 {
			Die("bad records line %q", line)
		}
		r := Record{Idx: atoi(f[0]), Partition: int32(atoi(f[1])), TimestampMs: atoi64(f[2]),
			Key: unb64(f[3]), Value: unb64(f[4])}
		if f[5] != "" {
			for _, item := range strings.Split(f[5], ",") {
				k, v, _ := strings.Cut(item, ":")
				r.Headers = append(r.Headers, Header{string(unb64(k)), unb64(v)})
			}
		}
		out = append(out, r)
	}
	return out
}

// Consumed is one line of the consumed file; TsType is create, append, none or unknown.
type Consumed struct {
	Partition   int32
	Offset      int64
	TimestampMs int64
	TsType      string
	Key, Value  []byte
	Headers     []Header
}

// Format renders a consumed record as scenario.format_consumed does.
func (c Consumed) Format() string {
	hs := make([]string, 0, len(c.Headers))
	for _, h := range c.Headers {
		v := h.Value
		if v == nil {
			v = []byte{}
		}
		hs = append(hs, b64([]byte(h.Key))+":"+b64(v))
	}
	return fmt.Sprintf("%d\t%d\t%d\t%s\t%s\t%s\t%s\n", c.Partition, c.Offset, c.TimestampMs, c.TsType,
		b64(c.Key), b64(c.Value), strings.Join(hs, ","))
}

// WriteConsumed writes the consumed file sorted by (partition, offset): clients interleave
// partitions, and the order within a partition is what the checks look at (a client that
// returned a partition out of order still fails, through the offsets 0..n-1 check).
func WriteConsumed(path string, recs []Consumed) {
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].Partition != recs[j].Partition {
			return recs[i].Partition < recs[j].Partition
		}
		return false // stable: keep the client's order within a partition
	})
	f, err := os.Create(path)
	if err != nil {
		Die("%v", err)
	}
	w := bufio.NewWriter(f)
	for _, c := range recs {
		w.WriteString(c.Format())
	}
	if err := w.Flush(); err != nil {
		Die("%v", err)
	}
	if err := f.Close(); err != nil {
		Die("%v", err)
	}
}

// Query is one ListOffsets-by-timestamp question.
type Query struct {
	Partition   int32
	TimestampMs int64
}

// ReadQueries reads the queries file (scenario.write_queries).
func ReadQueries(path string) []Query {
	var out []Query
	for _, line := range readLines(path) {
		f := strings.Split(line, "\t")
		out = append(out, Query{int32(atoi(f[0])), atoi64(f[1])})
	}
	return out
}

// WriteAnswers writes the answers file: partition, timestamp, offset (-1 = none).
func WriteAnswers(path string, qs []Query, offsets []int64) {
	var b strings.Builder
	for i, q := range qs {
		fmt.Fprintf(&b, "%d\t%d\t%d\n", q.Partition, q.TimestampMs, offsets[i])
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		Die("%v", err)
	}
}

// ExitUnlessCommitted is scenario.exit_unless_committed: every partition's committed offset
// must equal its log end offset (a partition without records may have none, or 0).
// committed lacks a partition that has no committed offset.
func ExitUnlessCommitted(ends map[int32]int64, committed map[int32]int64) {
	var problems []string
	parts := make([]int32, 0, len(ends))
	for p := range ends {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, p := range parts {
		end := ends[p]
		got, ok := committed[p]
		if end == 0 && (!ok || got <= 0) {
			continue
		}
		if !ok || got != end {
			have := "none"
			if ok {
				have = strconv.FormatInt(got, 10)
			}
			problems = append(problems, fmt.Sprintf("p%d: committed %s, log end offset %d", p, have, end))
		}
	}
	for p := range committed {
		if _, ok := ends[p]; !ok {
			problems = append(problems, fmt.Sprintf("committed offset for unknown partition %d", p))
		}
	}
	if len(problems) > 0 {
		Die("committed offsets differ from the end offsets: %s", strings.Join(problems, "; "))
	}
	fmt.Printf("committed offsets equal the log end offsets %s\n", FormatEnds(ends))
}

// FormatEnds renders end offsets like Python's dict: {0: 1667, 1: 1667, ...}.
func FormatEnds(ends map[int32]int64) string {
	parts := make([]int32, 0, len(ends))
	for p := range ends {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	items := make([]string, len(parts))
	for i, p := range parts {
		items[i] = fmt.Sprintf("%d: %d", p, ends[p])
	}
	return "{" + strings.Join(items, ", ") + "}"
}

// Total is the sum of the end offsets: how many records a full read must return.
func Total(ends map[int32]int64) int64 {
	var n int64
	for _, e := range ends {
		n += e
	}
	return n
}
