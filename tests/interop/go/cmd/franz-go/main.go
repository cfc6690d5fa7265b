// franz-go client program of the interoperability suite (github.com/twmb/franz-go: kgo for
// producing and consuming, kadm for admin), mirroring the Python, Java and kafkajs programs
// (tests/interop/scenario.py documents the command line and the file formats).
//
// create: kadm CreateTopics, then kadm ListTopics until every partition has a leader.
// produce: explicit partitions (ManualPartitioner) and timestamps, the client's defaults
// otherwise (idempotent, acks=all).
// consume: no consumer group, ConsumePartitions from the start of every partition.
// consume-group: ConsumerGroup + ConsumeTopics from the start, auto commit off,
// CommitUncommittedOffsets once every partition is read, then kadm FetchOffsets must show the
// end offsets.
// offsets: a kmsg.ListOffsetsRequest per query timestamp, sent with RequestSharded (routed to
// each partition's leader): kadm's ListOffsetsAfterMilli would turn the broker's "no such
// offset" (-1) into the end offset, hiding what the broker answered.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"shardlog.dev/interop/internal/scen"
)

func main() {
	a := scen.ParseArgs()
	ctx, cancel := context.WithTimeout(context.Background(), a.Timeout)
	defer cancel()
	steps := map[string]func(context.Context, scen.Args) error{
		"create": create, "produce": produce, "consume": consume, "consume-group": consumeGroup,
		"offsets": offsets,
	}
	fn, ok := steps[a.Step]
	if !ok {
		scen.Die("unknown step %s", a.Step)
	}
	if err := fn(ctx, a); err != nil {
		scen.Die("%s: %v", a.Step, err)
	}
}

func newClient(a scen.Args, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.Bootstrap), kgo.ClientID("shardlog-interop")},
		opts...)...)
}

func create(ctx context.Context, a scen.Args) error {
	cl, err := newClient(a)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	res, err := adm.CreateTopic(ctx, int32(a.Partitions), 1, nil, a.Topic)
	if err != nil {
		return err
	}
	if res.Err != nil {
		return fmt.Errorf("CreateTopics: %w (%s)", res.Err, res.ErrMessage)
	}
	for {
		tds, err := adm.ListTopics(ctx, a.Topic)
		if err == nil {
			td := tds[a.Topic]
			leaders := 0
			for _, p := range td.Partitions {
				if p.Err == nil && p.Leader >= 0 {
					leaders++
				}
			}
			if td.Err == nil && len(td.Partitions) == a.Partitions && leaders == a.Partitions {
				fmt.Printf("metadata: %d partitions with leaders, topic id %s\n", leaders, td.ID)
				return nil
			}
			err = fmt.Errorf("metadata shows %d partitions, %d with leaders (%v)", len(td.Partitions), leaders, td.Err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func codec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("unknown codec %q", name)
}

func produce(ctx context.Context, a scen.Args) error {
	c, err := codec(a.Compression)
	if err != nil {
		return err
	}
	cl, err := newClient(a, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(c), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	var failed []error
	failures := make(chan error, 1)
	done := make(chan struct{})
	go func() { // promises run on the client's goroutines: collect their errors here
		for e := range failures {
			failed = append(failed, e)
		}
		close(done)
	}()
	for _, r := range scen.ReadRecords(a.Input) {
		rec := &kgo.Record{Topic: a.Topic, Key: r.Key, Value: r.Value, Partition: r.Partition}
		if r.Partition < 0 {
			return errors.New("franz-go program produces explicit partitions only")
		}
		if r.TimestampMs >= 0 {
			rec.Timestamp = time.UnixMilli(r.TimestampMs)
		}
		for _, h := range r.Headers {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		cl.Produce(ctx, rec, func(rec *kgo.Record, err error) {
			if err != nil {
				failures <- fmt.Errorf("p%d key %s: %w", rec.Partition, rec.Key, err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	close(failures)
	<-done
	if len(failed) > 0 {
		return fmt.Errorf("%d sends failed, first: %v", len(failed), failed[0])
	}
	return nil
}

func endOffsets(ctx context.Context, cl *kgo.Client, a scen.Args) (map[int32]int64, error) {
	listed, err := kadm.NewClient(cl).ListEndOffsets(ctx, a.Topic)
	if err != nil {
		return nil, err
	}
	ends := map[int32]int64{}
	var lerr error
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			lerr = fmt.Errorf("end offset of p%d: %w", o.Partition, o.Err)
		}
		ends[o.Partition] = o.Offset
	})
	if lerr == nil && len(ends) != a.Partitions {
		lerr = fmt.Errorf("end offsets for %d partitions, expected %d: %v", len(ends), a.Partitions, ends)
	}
	return ends, lerr
}

func toConsumed(r *kgo.Record) scen.Consumed {
	tstype := map[int8]string{0: "create", 1: "append"}[r.Attrs.TimestampType()]
	if tstype == "" {
		tstype = "none"
	}
	c := scen.Consumed{Partition: r.Partition, Offset: r.Offset, TimestampMs: r.Timestamp.UnixMilli(),
		TsType: tstype, Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		c.Headers = append(c.Headers, scen.Header{Key: h.Key, Value: h.Value})
	}
	return c
}

// pollUntil reads until every partition's next offset reaches its end offset.
func pollUntil(ctx context.Context, cl *kgo.Client, ends map[int32]int64) ([]scen.Consumed, error) {
	next := map[int32]int64{}
	var out []scen.Consumed
	behind := func() bool {
		for p, end := range ends {
			if next[p] < end {
				return true
			}
		}
		return false
	}
	for behind() {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, fmt.Errorf("timed out at %v before the end offsets %v", next, ends)
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			ferr = fmt.Errorf("fetch %s p%d: %w", t, p, err)
		})
		if ferr != nil {
			return out, ferr
		}
		fetches.EachRecord(func(r *kgo.Record) {
			out = append(out, toConsumed(r))
			next[r.Partition] = r.Offset + 1
		})
	}
	return out, nil
}

func consume(ctx context.Context, a scen.Args) error {
	admCl, err := newClient(a)
	if err != nil {
		return err
	}
	ends, err := endOffsets(ctx, admCl, a)
	admCl.Close()
	if err != nil {
		return err
	}
	parts := map[int32]kgo.Offset{}
	for p := range ends {
		parts[p] = kgo.NewOffset().AtStart()
	}
	cl, err := newClient(a, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{a.Topic: parts}))
	if err != nil {
		return err
	}
	defer cl.Close()
	out, err := pollUntil(ctx, cl, ends)
	scen.WriteConsumed(a.Output, out)
	return err
}

func consumeGroup(ctx context.Context, a scen.Args) error {
	if a.Group == "" {
		return errors.New("missing --group")
	}
	cl, err := newClient(a, kgo.ConsumerGroup(a.Group), kgo.ConsumeTopics(a.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		return err
	}
	defer cl.Close()
	ends, err := endOffsets(ctx, cl, a)
	if err != nil {
		return err
	}
	out, err := pollUntil(ctx, cl, ends)
	scen.WriteConsumed(a.Output, out)
	if err != nil {
		return err
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		return fmt.Errorf("CommitUncommittedOffsets: %w", err)
	}
	fetched, err := kadm.NewClient(cl).FetchOffsets(ctx, a.Group)
	if err != nil {
		return fmt.Errorf("FetchOffsets: %w", err)
	}
	if err := fetched.Error(); err != nil {
		return fmt.Errorf("FetchOffsets: %w", err)
	}
	committed := map[int32]int64{}
	fetched.Each(func(o kadm.OffsetResponse) {
		if o.Topic == a.Topic && o.At >= 0 {
			committed[o.Partition] = o.At
		}
	})
	scen.ExitUnlessCommitted(ends, committed)
	return nil
}

func offsets(ctx context.Context, a scen.Args) error {
	cl, err := newClient(a)
	if err != nil {
		return err
	}
	defer cl.Close()
	queries := scen.ReadQueries(a.Input)
	byTs := map[int64][]int32{}
	var stamps []int64
	for _, q := range queries {
		if _, ok := byTs[q.TimestampMs]; !ok {
			stamps = append(stamps, q.TimestampMs)
		}
		byTs[q.TimestampMs] = append(byTs[q.TimestampMs], q.Partition)
	}
	sort.Slice(stamps, func(i, j int) bool { return stamps[i] < stamps[j] })
	found := map[scen.Query]int64{}
	// One request per timestamp: a partition may appear once per request.
	for _, ts := range stamps {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = a.Topic
		for _, p := range byTs[ts] {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition = p
			rp.Timestamp = ts
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		for _, shard := range cl.RequestSharded(ctx, req) {
			if shard.Err != nil {
				return fmt.Errorf("ListOffsets ts=%d (broker %d): %w", ts, shard.Meta.NodeID, shard.Err)
			}
			for _, t := range shard.Resp.(*kmsg.ListOffsetsResponse).Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
						return fmt.Errorf("ListOffsets ts=%d p%d: %w", ts, p.Partition, err)
					}
					found[scen.Query{Partition: p.Partition, TimestampMs: ts}] = p.Offset
				}
			}
		}
	}
	answers := make([]int64, len(queries))
	for i, q := range queries {
		off, ok := found[q]
		if !ok {
			return fmt.Errorf("no answer for p%d ts=%d", q.Partition, q.TimestampMs)
		}
		answers[i] = off
	}
	scen.WriteAnswers(a.Output, queries, answers)
	fmt.Fprintf(os.Stdout, "%d ListOffsets requests\n", len(stamps))
	return nil
}
