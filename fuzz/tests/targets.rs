//! One bolero harness per decoder. Under `cargo test` each replays its corpus
//! (`tests/__fuzz__/<target>/corpus`) and crash files, then random inputs for
//! `BOLERO_RANDOM_TEST_TIME_MS` (set by `.ci/run`); under `cargo bolero test <target>` it is a
//! coverage-guided fuzzer (fuzz/README.md).

mod seeds;

macro_rules! targets {
    ($($name:ident),* $(,)?) => {$(
        #[test]
        fn $name() {
            bolero::check!().for_each(shardlog_fuzz::$name);
        }
    )*};
}

targets!(
    request_frame,
    record_batch,
    decompress,
    segment_scan,
    offset_index,
    time_index,
    epoch_checkpoint,
    cleaner_checkpoint,
    producer_snapshot,
    metadata_log,
    group_records,
    raft_store,
    txn_index,
    sasl_tokens,
    tls_stores,
    oauthbearer,
);
