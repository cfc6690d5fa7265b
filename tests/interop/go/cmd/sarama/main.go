// sarama client program of the interoperability suite (github.com/IBM/sarama), mirroring the
// Python, Java and kafkajs programs (tests/interop/scenario.py documents the command line and
// the file formats). config.Version is the pinned Kafka's (4.1): sarama then clamps each
// request to the broker's advertised ApiVersions range.
//
// create: ClusterAdmin CreateTopic, then DescribeTopics until every partition has a leader.
// produce: AsyncProducer with the manual partitioner, explicit timestamps, acks=all; sarama's
// producer is not idempotent by default and is left so.
// consume: no consumer group, one PartitionConsumer per partition from OffsetOldest.
// consume-group: ConsumerGroup from OffsetOldest, auto commit off, MarkMessage for every
// record and session.Commit() once every partition is read, then ClusterAdmin
// ListConsumerGroupOffsets must show the end offsets.
// offsets: Client.GetOffset(topic, partition, timestamp), one ListOffsets per query.
// sarama does not expose a record's timestamp type: the consumed file says "unknown".
package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"

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

func config() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V4_1_0_0
	cfg.ClientID = "shardlog-interop"
	return cfg
}

func create(ctx context.Context, a scen.Args) error {
	adm, err := sarama.NewClusterAdmin([]string{a.Bootstrap}, config())
	if err != nil {
		return err
	}
	defer adm.Close()
	detail := &sarama.TopicDetail{NumPartitions: int32(a.Partitions), ReplicationFactor: 1}
	if err := adm.CreateTopic(a.Topic, detail, false); err != nil {
		return fmt.Errorf("CreateTopic: %w", err)
	}
	for {
		mds, err := adm.DescribeTopics([]string{a.Topic})
		if err == nil {
			md := mds[0]
			leaders := 0
			for _, p := range md.Partitions {
				if p.Err == sarama.ErrNoError && p.Leader >= 0 {
					leaders++
				}
			}
			if md.Err == sarama.ErrNoError && len(md.Partitions) == a.Partitions && leaders == a.Partitions {
				fmt.Printf("DescribeTopics: %d partitions with leaders\n", leaders)
				return nil
			}
			err = fmt.Errorf("DescribeTopics shows %d partitions, %d with leaders (%v)", len(md.Partitions), leaders, md.Err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func codec(name string) (sarama.CompressionCodec, error) {
	switch name {
	case "none":
		return sarama.CompressionNone, nil
	case "gzip":
		return sarama.CompressionGZIP, nil
	case "snappy":
		return sarama.CompressionSnappy, nil
	case "lz4":
		return sarama.CompressionLZ4, nil
	case "zstd":
		return sarama.CompressionZSTD, nil
	}
	return sarama.CompressionNone, fmt.Errorf("unknown codec %q", name)
}

func produce(ctx context.Context, a scen.Args) error {
	cfg := config()
	c, err := codec(a.Compression)
	if err != nil {
		return err
	}
	cfg.Producer.Compression = c
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Flush.Frequency = 5 * time.Millisecond
	p, err := sarama.NewAsyncProducer([]string{a.Bootstrap}, cfg)
	if err != nil {
		return err
	}
	records := scen.ReadRecords(a.Input)
	var ok, failed int
	var firstErr error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for range p.Successes() {
			ok++
		}
	}()
	go func() {
		defer wg.Done()
		for e := range p.Errors() {
			if failed == 0 {
				firstErr = e
			}
			failed++
		}
	}()
	for _, r := range records {
		if r.Partition < 0 {
			return errors.New("sarama program produces explicit partitions only")
		}
		msg := &sarama.ProducerMessage{Topic: a.Topic, Key: sarama.ByteEncoder(r.Key),
			Value: sarama.ByteEncoder(r.Value), Partition: r.Partition}
		if r.TimestampMs >= 0 {
			msg.Timestamp = time.UnixMilli(r.TimestampMs)
		}
		for _, h := range r.Headers {
			msg.Headers = append(msg.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
		}
		select {
		case p.Input() <- msg:
		case <-ctx.Done():
			return fmt.Errorf("timed out sending")
		}
	}
	p.AsyncClose() // flushes, then closes Successes and Errors
	wg.Wait()
	if failed > 0 {
		return fmt.Errorf("%d sends failed, first: %v", failed, firstErr)
	}
	if ok != len(records) {
		return fmt.Errorf("%d of %d sends acknowledged", ok, len(records))
	}
	return nil
}

func endOffsets(client sarama.Client, a scen.Args) (map[int32]int64, error) {
	ends := map[int32]int64{}
	for p := 0; p < a.Partitions; p++ {
		off, err := client.GetOffset(a.Topic, int32(p), sarama.OffsetNewest)
		if err != nil {
			return nil, fmt.Errorf("end offset of p%d: %w", p, err)
		}
		ends[int32(p)] = off
	}
	return ends, nil
}

func toConsumed(m *sarama.ConsumerMessage) scen.Consumed {
	c := scen.Consumed{Partition: m.Partition, Offset: m.Offset, TimestampMs: m.Timestamp.UnixMilli(),
		TsType: "unknown", Key: m.Key, Value: m.Value}
	for _, h := range m.Headers {
		c.Headers = append(c.Headers, scen.Header{Key: string(h.Key), Value: h.Value})
	}
	return c
}

func consume(ctx context.Context, a scen.Args) error {
	cfg := config()
	cfg.Consumer.Return.Errors = true
	client, err := sarama.NewClient([]string{a.Bootstrap}, cfg)
	if err != nil {
		return err
	}
	defer client.Close()
	ends, err := endOffsets(client, a)
	if err != nil {
		return err
	}
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return err
	}
	defer consumer.Close()
	results := make([][]scen.Consumed, a.Partitions)
	errs := make([]error, a.Partitions)
	var wg sync.WaitGroup
	for p := 0; p < a.Partitions; p++ {
		if ends[int32(p)] == 0 {
			continue
		}
		pc, err := consumer.ConsumePartition(a.Topic, int32(p), sarama.OffsetOldest)
		if err != nil {
			return fmt.Errorf("ConsumePartition p%d: %w", p, err)
		}
		wg.Add(1)
		go func(p int, pc sarama.PartitionConsumer) {
			defer wg.Done()
			defer pc.Close()
			for {
				select {
				case m := <-pc.Messages():
					results[p] = append(results[p], toConsumed(m))
					if m.Offset+1 >= ends[int32(p)] {
						return
					}
				case e := <-pc.Errors():
					errs[p] = e
					return
				case <-ctx.Done():
					errs[p] = fmt.Errorf("p%d: timed out with %d of %d records", p, len(results[p]), ends[int32(p)])
					return
				}
			}
		}(p, pc)
	}
	wg.Wait()
	var out []scen.Consumed
	for _, r := range results {
		out = append(out, r...)
	}
	scen.WriteConsumed(a.Output, out)
	return errors.Join(errs...)
}

// groupHandler records every message, marks it, and once every partition has been read to
// its end offset commits the marked offsets (session.Commit) and ends the session.
type groupHandler struct {
	ends   map[int32]int64
	cancel context.CancelFunc
	mu     sync.Mutex
	out    []scen.Consumed
	next   map[int32]int64
	done   bool
}

func (h *groupHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *groupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *groupHandler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			s.MarkMessage(m, "")
			if h.record(m) {
				s.Commit() // synchronous; failures arrive on ConsumerGroup.Errors()
				h.cancel()
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

// record returns true the first time every partition has been read to its end.
func (h *groupHandler) record(m *sarama.ConsumerMessage) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.out = append(h.out, toConsumed(m))
	h.next[m.Partition] = m.Offset + 1
	if h.done {
		return false
	}
	for p, end := range h.ends {
		if h.next[p] < end {
			return false
		}
	}
	h.done = true
	return true
}

func consumeGroup(ctx context.Context, a scen.Args) error {
	if a.Group == "" {
		return errors.New("missing --group")
	}
	cfg := config()
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Return.Errors = true
	client, err := sarama.NewClient([]string{a.Bootstrap}, cfg)
	if err != nil {
		return err
	}
	defer client.Close()
	ends, err := endOffsets(client, a)
	if err != nil {
		return err
	}
	group, err := sarama.NewConsumerGroupFromClient(a.Group, client)
	if err != nil {
		return err
	}
	var groupErrs []error
	var errMu sync.Mutex
	go func() {
		for e := range group.Errors() {
			errMu.Lock()
			groupErrs = append(groupErrs, e)
			errMu.Unlock()
		}
	}()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	h := &groupHandler{ends: ends, cancel: stop, next: map[int32]int64{}}
	if scen.Total(ends) == 0 {
		h.done = true
		stop()
	}
	// Consume returns at every rebalance; call it again until the handler is done.
	for runCtx.Err() == nil {
		if err := group.Consume(runCtx, []string{a.Topic}, h); err != nil {
			if errors.Is(err, sarama.ErrClosedConsumerGroup) {
				break
			}
			return fmt.Errorf("Consume: %w", err)
		}
	}
	closeErr := group.Close() // leaves the group
	h.mu.Lock()
	scen.WriteConsumed(a.Output, h.out)
	done := h.done
	h.mu.Unlock()
	if !done {
		return fmt.Errorf("timed out at %v before the end offsets %v", h.next, ends)
	}
	errMu.Lock()
	defer errMu.Unlock()
	if len(groupErrs) > 0 {
		return fmt.Errorf("consumer group errors: %v", errors.Join(groupErrs...))
	}
	if closeErr != nil {
		return fmt.Errorf("closing the group: %w", closeErr)
	}
	adm, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		return err
	}
	parts := make([]int32, 0, len(ends))
	for p := range ends {
		parts = append(parts, p)
	}
	res, err := adm.ListConsumerGroupOffsets(a.Group, map[string][]int32{a.Topic: parts})
	if err != nil {
		return fmt.Errorf("ListConsumerGroupOffsets: %w", err)
	}
	if res.Err != sarama.ErrNoError {
		return fmt.Errorf("ListConsumerGroupOffsets: %w", res.Err)
	}
	committed := map[int32]int64{}
	for _, p := range parts {
		b := res.GetBlock(a.Topic, p)
		if b == nil {
			continue
		}
		if b.Err != sarama.ErrNoError {
			return fmt.Errorf("ListConsumerGroupOffsets p%d: %w", p, b.Err)
		}
		if b.Offset >= 0 {
			committed[p] = b.Offset
		}
	}
	scen.ExitUnlessCommitted(ends, committed)
	return nil
}

func offsets(ctx context.Context, a scen.Args) error {
	client, err := sarama.NewClient([]string{a.Bootstrap}, config())
	if err != nil {
		return err
	}
	defer client.Close()
	queries := scen.ReadQueries(a.Input)
	answers := make([]int64, len(queries))
	for i, q := range queries {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// sarama returns the broker's offset as is: -1 when no record is at or after q.
		off, err := client.GetOffset(a.Topic, q.Partition, q.TimestampMs)
		if err != nil {
			return fmt.Errorf("GetOffset p%d ts=%d: %w", q.Partition, q.TimestampMs, err)
		}
		answers[i] = off
	}
	scen.WriteAnswers(a.Output, queries, answers)
	fmt.Printf("%d GetOffset calls\n", len(queries))
	return nil
}
